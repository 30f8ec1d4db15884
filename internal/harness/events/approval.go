package events

import (
	"encoding/json"
	"time"
)

// Kinds of an approval's two records: a call that a policy rule says needs a person's
// approval is asked (approval_requested, which the CLI and the web page show as a card
// to decide), then decided (approval_decided: approved, denied, expired or cancelled).
const (
	KindApprovalRequested = "approval_requested"
	KindApprovalDecided   = "approval_decided"
)

// ApprovalRequested is a call that waits for a person: what the approvers see.
type ApprovalRequested struct {
	ID         string `json:"id"`
	ToolCallID string `json:"tool_call_id"`
	// What is "mcp_call" (an MCP tool, called by the model or a script) or "code" (a
	// script or command the agent's approve_code holds).
	What   string `json:"kind"`
	Server string `json:"server,omitempty"`
	Tool   string `json:"tool"`
	// Arguments are the call's arguments as the approvers see them (JSON text, each
	// string cut to what a card shows); Code and Language the code to approve.
	Arguments string `json:"arguments,omitempty"`
	Code      string `json:"code,omitempty"`
	Language  string `json:"language,omitempty"`
	Rule      int    `json:"rule"`
	// Reason is why the call is held; for an elicitation (kind "elicitation"), the
	// server's question, whose answer Schema describes.
	Reason string          `json:"reason,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
	// Approvers are the rule's patterns of the users who may decide ("$caller": the
	// session's own user).
	Approvers []string  `json:"approvers"`
	Deadline  time.Time `json:"deadline"`
}

// ApprovalDecided is how an approval ended: State is approved, denied, expired (nobody
// decided before the deadline) or cancelled (the turn was cancelled while it waited);
// By is the user who decided ("harness" for the last two).
type ApprovalDecided struct {
	ID         string    `json:"id"`
	ToolCallID string    `json:"tool_call_id"`
	State      string    `json:"state"`
	By         string    `json:"by"`
	At         time.Time `json:"at"`
	Note       string    `json:"note,omitempty"`
}

func (ApprovalRequested) Kind() string { return KindApprovalRequested }
func (ApprovalDecided) Kind() string   { return KindApprovalDecided }

// Registered here rather than in the table of events.go, beside the payloads they read.
func init() {
	decoders[KindApprovalRequested] = plain[ApprovalRequested]
	decoders[KindApprovalDecided] = plain[ApprovalDecided]
}
