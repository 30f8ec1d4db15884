package events

// KindMCPCall is one MCP call a Code Mode script made through the bridge, with its
// outcome: the record that lets a team see what a script did outside the sandbox.
const KindMCPCall = "mcp_call"

// Outcomes of an MCP call.
const (
	// OutcomeCompleted: the server answered (IsError says whether the tool failed).
	OutcomeCompleted = "completed"
	// OutcomeFailed: the call did not reach a result: the server could not be reached,
	// refused it, or broke the protocol.
	OutcomeFailed = "failed"
	// OutcomeDenied: the harness refused it (allowed_tools, the operator's policy, or
	// an approval that was denied, expired or cancelled); nothing was sent.
	OutcomeDenied = "denied"
	// OutcomeLimit: a Code Mode limit (calls per script) or one of the operator's
	// cumulative budgets refused it before it was sent.
	OutcomeLimit = "limit"
	// OutcomeUnknown: sent, but its end was not seen: it timed out, or its script was
	// cancelled while it ran (a later late record says how it ended, when it ends).
	OutcomeUnknown = "unknown"
)

// MCPCall records one bridged MCP call. Its arguments are kept only as a digest: they
// are the script's data, which the session log need not hold to prove what was called.
type MCPCall struct {
	// ToolCallID is the model's call of the Code Mode tool that ran the script; Call
	// numbers the script's MCP calls from 1.
	ToolCallID string `json:"tool_call_id"`
	Call       int    `json:"call"`
	User       string `json:"user"`
	Agent      string `json:"agent"`
	Tool       string `json:"tool"`
	// ArgsSHA256 is the SHA-256 of the arguments as the script sent them (JSON).
	ArgsSHA256 string `json:"args_sha256"`
	Outcome    string `json:"outcome"`
	// IsError: the tool answered with an error result (outcome completed).
	IsError bool `json:"is_error,omitempty"`
	// Error says why a call was denied, failed, limited or left unknown.
	Error string `json:"error,omitempty"`
	// Rule is the policy rule that decided (its index in the file), -1 for the default;
	// absent when no policy file is configured.
	Rule *int `json:"rule,omitempty"`
	// ResultBytes is the size of the result the script received (after minimizing).
	ResultBytes int   `json:"result_bytes"`
	DurationMS  int64 `json:"duration_ms"`
	// Approval is the decision on the call when its policy rule asked a person (who,
	// when, the note); nil when none was asked.
	Approval *ApprovalDecided `json:"approval,omitempty"`
	// Late: recorded after the script ended (it was cancelled while this call ran);
	// an earlier record of the same call said unknown.
	Late bool `json:"late,omitempty"`
}

func (MCPCall) Kind() string { return KindMCPCall }
