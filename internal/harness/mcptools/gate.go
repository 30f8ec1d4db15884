package mcptools

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
)

// The gate every call passes before it is sent, whether the model made it or a Code Mode
// script did: the operator's policy (allow, deny, or approve: wait for a person), then
// the cumulative budgets, which are charged in the control-plane database so that they
// hold across turns, sessions and harness replicas. Authorize runs the gate and returns
// a Permit; Permit.Call sends the call. They are apart so that a caller's own time limit
// on a call (Code Mode's call_timeout_seconds) does not run while a person decides.

// Origin is the session, turn and model call that make an MCP call: what an approval is
// recorded against and what per-session and per-turn budgets count by.
type Origin struct {
	SessionID  string
	RunID      string
	ToolCallID string
	// Progress, when set, receives the call's progress as the server reports it, one
	// line at a time ("kb__build: 3/10 compiling").
	Progress func(text string)
	// Appended, when set, is told that the gate appended to the session's log (an
	// approval it waits for), so the session's streams show it while the call waits.
	Appended func()
}

// Approver asks the people a rule names to decide a call and waits for the decision
// (approvals.Gate). Await returns when someone decided, the rule's timeout passed, or
// ctx ended (the turn was cancelled); each of the last two is a denial it records.
type Approver interface {
	Await(ctx context.Context, req ApprovalRequest) (Verdict, error)
}

// Asking is who asks a person something through the harness, and from where: the
// call of o, made for User by the agent (Agent, of Owner), on the server at Server.
type Asking struct {
	Origin             Origin
	User, Agent, Owner string
	Server             string // the server's URL
}

// ApprovalRequest is a call waiting for approval.
type ApprovalRequest struct {
	Asking
	Tool      string // the server's own tool name
	Name      string // "<server>__<tool>", as the model and scripts call it
	Args      map[string]any
	Rule      int
	Reason    string
	Approvers []string
	Timeout   time.Duration
}

// Verdict is how an approval ended.
type Verdict struct {
	ID       string    `json:"id"`
	Approved bool      `json:"approved"`
	State    string    `json:"state"` // store.ApprovalApproved, ...Denied, ...Expired, ...Cancelled
	By       string    `json:"by,omitempty"`
	Note     string    `json:"note,omitempty"`
	At       time.Time `json:"at"`
}

// Budgets is the operator's cumulative budgets (budgets.Meter). Admit charges one call
// to every budget that applies to s, or refuses it (an error wrapping ErrOverBudget,
// naming the budget, its window and when it refills) and charges nothing; Spent charges
// the bytes of the result the caller received.
type Budgets interface {
	Admit(ctx context.Context, s policy.Subject) error
	Spent(ctx context.Context, s policy.Subject, resultBytes int64)
}

// ErrOverBudget wraps a call refused by a cumulative budget; nothing was sent.
var ErrOverBudget = errors.New("over a cumulative budget of the harness's MCP policy")

// Permit is a call the gate let through: Call sends it, once.
type Permit struct {
	t      *Toolset
	origin Origin
	name   string
	r      route
	cs     *mcp.ClientSession
	args   map[string]any
	subj   policy.Subject
	value  Value // the policy's rule and the approval, carried into the result
}

// Authorize runs the gate for the call of the allowed tool name by o: the policy, an
// approval when its rule asks for one, then the budgets. An error means the call must
// not be made: ErrUnknownTool, ErrDenied (by a rule, or not approved: the Value says
// which and carries the approval), ErrOverBudget, or ctx ended while it waited.
func (t *Toolset) Authorize(ctx context.Context, o Origin, name string, args map[string]any) (p *Permit, v Value, err error) {
	t.mu.Lock()
	r, ok := t.routes[name]
	var cs *mcp.ClientSession
	if ok {
		cs = t.sessions[r.server]
	}
	t.mu.Unlock()
	ctx, span := startAuthorize(ctx, name, r) // trace.go
	defer func() { endAuthorize(span, v, err) }()
	if !ok || cs == nil {
		return nil, Value{}, fmt.Errorf("%q: %w", name, ErrUnknownTool)
	}
	p = &Permit{t: t, origin: o, name: name, r: r, cs: cs, args: args, subj: policy.Subject{
		User: t.opts.User, Owner: t.opts.Owner, Agent: t.opts.Agent, Session: o.SessionID, Turn: o.RunID, Server: r.url, Tool: r.tool,
	}}
	if err := t.decide(ctx, o, p, &p.value); err != nil {
		return nil, p.value, err
	}
	if t.opts.Budgets != nil {
		if err := t.opts.Budgets.Admit(ctx, p.subj); err != nil {
			p.value.Refusal = fmt.Sprintf("MCP tool %s was refused for user %q: %v", name, t.opts.User, err)
			return nil, p.value, err
		}
	}
	return p, p.value, nil
}

// decide asks the operator's policy about the call (allowed_tools was applied when the
// tools were listed: a tool it leaves out has no route), and a person when the rule that
// matched says approve, recording the verdicts in v.
func (t *Toolset) decide(ctx context.Context, o Origin, p *Permit, v *Value) error {
	if t.opts.Policy == nil {
		return nil
	}
	d := t.opts.Policy.Decide(policy.Request{User: t.opts.User, Owner: t.opts.Owner, Agent: t.opts.Agent,
		Server: p.r.url, Tool: p.r.tool, Args: p.args})
	rule, reason := d.Rule, d.Reason
	v.Rule = &rule
	if reason == "" {
		reason = "no reason given"
	}
	switch {
	case d.Allow:
		return nil
	case d.Effect == policy.EffectApprove && d.Approval != nil:
		return t.await(ctx, o, p, d, v)
	}
	v.Refusal = fmt.Sprintf("MCP tool %s was refused for user %q by the harness's policy (rule %d): %s", p.name, t.opts.User, rule, reason)
	return fmt.Errorf("%w: %s", ErrDenied, v.Refusal)
}

// await waits for a person's decision on a call that rule d says needs one. A harness
// with no Approver cannot ask anyone, so the call is refused (never made unasked).
func (t *Toolset) await(ctx context.Context, o Origin, p *Permit, d policy.Decision, v *Value) error {
	if t.opts.Approver == nil {
		v.Refusal = fmt.Sprintf("MCP tool %s needs a person's approval (rule %d: %s), and this harness has no approvals configured; it was refused", p.name, d.Rule, d.Reason)
		return fmt.Errorf("%w: %s", ErrDenied, v.Refusal)
	}
	wctx, span := startApproval(ctx, p.name, d.Rule)
	verdict, err := t.opts.Approver.Await(wctx, ApprovalRequest{
		Asking: t.asking(o, p.r.url), Tool: p.r.tool, Name: p.name, Args: p.args,
		Rule: d.Rule, Reason: d.Reason, Approvers: d.Approval.Approvers, Timeout: d.Approval.Timeout,
	})
	endApproval(span, verdict, err)
	if err != nil {
		v.Refusal = fmt.Sprintf("MCP tool %s needed a person's approval (rule %d), which could not be asked or awaited: %v", p.name, d.Rule, err)
		return fmt.Errorf("%w: %s", ErrDenied, v.Refusal)
	}
	v.Approval = &verdict
	if verdict.Approved {
		return nil
	}
	v.Refusal = fmt.Sprintf("MCP tool %s was not approved (rule %d: %s): %s", p.name, d.Rule, d.Reason, VerdictText(verdict))
	return fmt.Errorf("%w: %s", ErrDenied, v.Refusal)
}

// asking is the Asking of a call of o on the server at url.
func (t *Toolset) asking(o Origin, url string) Asking {
	return Asking{Origin: o, User: t.opts.User, Agent: t.opts.Agent, Owner: t.opts.Owner, Server: url}
}

// VerdictText says how a refused approval ended, for the model or the script.
func VerdictText(v Verdict) string {
	var s string
	switch v.State {
	case "expired":
		s = "nobody decided before the approval's deadline"
	case "cancelled":
		s = "the turn was cancelled while it waited"
	default:
		s = v.State + " by " + v.By
	}
	if v.Note != "" {
		s += ": " + v.Note
	}
	return s
}

// Call sends the permitted call and returns the tool's answer (see CallValue). The
// bytes of the result are charged to the budgets.
func (p *Permit) Call(ctx context.Context) (v Value, err error) {
	ctx, span := p.startCall(ctx) // trace.go
	defer func() { endCall(span, v, err) }()
	v = p.value
	args := p.args
	if args == nil {
		args = map[string]any{}
	}
	// The call is known while it runs, so that what its server asks meanwhile
	// (elicitation, sampling) reaches its session, and its progress its user.
	tok := p.t.calls.begin(p.origin, p.r.server, p.name)
	defer p.t.calls.end(tok)
	res, err := p.cs.CallTool(ctx, &mcp.CallToolParams{Meta: mcp.Meta{"progressToken": tok}, Name: p.r.tool, Arguments: args})
	if err != nil {
		if errors.Is(err, mcp.ErrConnectionClosed) {
			p.t.forget(p.r.server)
		}
		return v, fmt.Errorf("MCP server %s: %w", p.r.server, err)
	}
	fill(&v, res)
	return v, nil
}

// Spent charges the bytes of a result its caller received to the budgets: the caller
// says how many, since Code Mode minimizes a result before the script receives it.
func (p *Permit) Spent(ctx context.Context, resultBytes int64) {
	if p.t.opts.Budgets != nil {
		p.t.opts.Budgets.Spent(ctx, p.subj, resultBytes)
	}
}
