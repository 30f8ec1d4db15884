// Package approvals asks people to decide the calls that the operator's policy says
// need approval (a rule with "effect": "approve"), and waits for the decision.
//
// An approval is a row of the control-plane database (store.Approval), so any harness
// replica may serve the people who decide it (the HTTP API, the web page, the CLI),
// whichever replica runs the waiting call: the waiter polls the row. A decision is one
// conditional update (store.DecideApproval), so when two approvers answer at once, or
// the deadline passes while one answers, exactly one outcome is recorded and the call
// is made at most once. A timeout or a cancelled turn is a denial the waiter records.
//
// Who may decide: the users the rule's approvers patterns name ("$caller": the
// session's own user). Anyone else is told the approval does not exist (ErrNotFound),
// exactly as for an id that never existed, so an approval id is never authorization.
//
// What approvers see: the tool, its server, the rule and the arguments as the call
// carries them, each string cut to MaxArgumentText and the whole to MaxArguments. The
// harness's credentials are never arguments (they stay in its transport), so an
// approver never sees one.
package approvals

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Defaults and caps.
const (
	// DefaultPoll is how often a waiting call reads its approval.
	DefaultPoll = 250 * time.Millisecond
	// MaxArgumentText is how much of one string argument an approver is shown.
	MaxArgumentText = 4 << 10
	// MaxArguments is how much of the arguments' JSON an approval stores.
	MaxArguments = 64 << 10
	// Harness is who decides an approval that expired or whose turn was cancelled.
	Harness = "harness"
)

// ErrNotFound: no approval with that id that this user may see.
var ErrNotFound = errors.New("no such approval")

// Gate asks and waits (mcptools.Approver).
type Gate struct {
	Store  *store.Store
	Logger *slog.Logger
	// Now is the clock of deadlines; nil means time.Now.
	Now func() time.Time
	// Poll is how often a waiter reads its approval; 0 means DefaultPoll.
	Poll time.Duration
}

func (g *Gate) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// Await records the call as waiting for approval (the approval row and the session's
// approval_requested event), waits for a decision, the deadline or the end of ctx, and
// records how it ended (approval_decided). An error means the approval could not be
// recorded or read: the call is then refused by the caller.
func (g *Gate) Await(ctx context.Context, req mcptools.ApprovalRequest) (mcptools.Verdict, error) {
	a := store.Approval{
		ID: NewID(), SessionID: req.Origin.SessionID, RunID: req.Origin.RunID, ToolCallID: req.Origin.ToolCallID,
		User: req.User, Agent: req.Agent, Owner: req.Owner, Kind: store.ApprovalKindMCPCall,
		Server: req.Server, Tool: req.Tool, Arguments: Arguments(req.Args),
		Rule: req.Rule, Reason: req.Reason, Approvers: req.Approvers,
		Deadline: g.now().Add(req.Timeout),
	}
	return g.verdict(ctx, a, req.Origin.Appended)
}

// AwaitCode holds code (a script or a command) for the session's user to read and
// approve before it runs: the agent's approve_code.
func (g *Gate) AwaitCode(ctx context.Context, o mcptools.Origin, user, agent, owner, tool, language, code string, timeout time.Duration) (mcptools.Verdict, error) {
	a := store.Approval{
		ID: NewID(), SessionID: o.SessionID, RunID: o.RunID, ToolCallID: o.ToolCallID,
		User: user, Agent: agent, Owner: owner, Kind: store.ApprovalKindCode, Tool: tool,
		Code: code, Language: language, Rule: -1, Reason: "the agent's sandbox.approve_code holds every script and command for the session's user",
		Approvers: []string{policy.Caller}, Deadline: g.now().Add(timeout),
	}
	return g.verdict(ctx, a, o.Appended)
}

// verdict is await's decision as the waiting call learns it.
func (g *Gate) verdict(ctx context.Context, a store.Approval, appended func()) (mcptools.Verdict, error) {
	decided, err := g.await(ctx, a, appended)
	if err != nil {
		return mcptools.Verdict{}, err
	}
	return Verdict(decided), nil
}

// await records a, waits for its decision and records that: the approval as decided.
// appended, when set, is told after each record, so the session's streams show it at
// once.
func (g *Gate) await(ctx context.Context, a store.Approval, appended func()) (store.Approval, error) {
	if appended == nil {
		appended = func() {}
	}
	// The records outlive a cancelled turn: its cancellation is itself recorded.
	rctx := context.WithoutCancel(ctx)
	if err := g.Store.CreateApproval(rctx, a); err != nil {
		return a, fmt.Errorf("recording the approval: %w", err)
	}
	if _, err := events.Append(rctx, g.Store, a.SessionID, a.RunID, requested(a)); err != nil {
		return a, fmt.Errorf("recording the approval's request: %w", err)
	}
	appended()
	decided, err := g.wait(ctx, a)
	if err != nil {
		return decided, err
	}
	if _, err := events.Append(rctx, g.Store, a.SessionID, a.RunID, Decided(decided)); err != nil {
		g.log().Warn("recording an approval's decision", "approval", a.ID, "err", err)
	}
	appended()
	return decided, nil
}

// wait polls the approval until it is decided, marking it expired at its deadline and
// cancelled when ctx ends. Either mark may lose to a person's decision made at the same
// moment: the store then returns that decision, which stands.
func (g *Gate) wait(ctx context.Context, a store.Approval) (store.Approval, error) {
	poll := g.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	deadline := time.NewTimer(a.Deadline.Sub(g.now()))
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			return g.end(ctx, a.ID, store.ApprovalCancelled, "the turn was cancelled while the call waited")
		case <-deadline.C:
			return g.end(ctx, a.ID, store.ApprovalExpired, "nobody decided before the deadline")
		case <-tick.C:
			cur, err := g.Store.GetApproval(ctx, a.ID)
			if err != nil {
				if ctx.Err() != nil {
					continue
				}
				return cur, fmt.Errorf("reading approval %s: %w", a.ID, err)
			}
			if cur.State != store.ApprovalPending {
				return cur, nil
			}
			if !g.now().Before(cur.Deadline) {
				return g.end(ctx, a.ID, store.ApprovalExpired, "nobody decided before the deadline")
			}
		}
	}
}

// end records the harness's own ending of an approval (expired, cancelled), or returns
// the decision that got there first.
func (g *Gate) end(ctx context.Context, id, state, note string) (store.Approval, error) {
	a, err := g.Store.DecideApproval(context.WithoutCancel(ctx), id, state, Harness, note, g.now())
	if errors.Is(err, store.ErrDecided) {
		return a, nil
	}
	return a, err
}

func (g *Gate) log() *slog.Logger {
	if g.Logger != nil {
		return g.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// NewID is a fresh approval id: "apr_" and 24 hex digits from crypto/rand.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "apr_" + hex.EncodeToString(b[:])
}

// Verdict is how approval a ended, as the waiting call learns it.
func Verdict(a store.Approval) mcptools.Verdict {
	return mcptools.Verdict{ID: a.ID, Approved: a.State == store.ApprovalApproved, State: a.State, By: a.DecidedBy, Note: a.Note, At: a.DecidedAt}
}

// Decided is approval a's decision as the session's log records it.
func Decided(a store.Approval) events.ApprovalDecided {
	return events.ApprovalDecided{ID: a.ID, ToolCallID: a.ToolCallID, State: a.State, By: a.DecidedBy, At: a.DecidedAt, Note: a.Note}
}

func requested(a store.Approval) events.ApprovalRequested {
	return events.ApprovalRequested{
		ID: a.ID, ToolCallID: a.ToolCallID, What: a.Kind, Server: a.Server, Tool: a.Tool,
		Arguments: a.Arguments, Code: a.Code, Language: a.Language, Rule: a.Rule, Reason: a.Reason,
		Approvers: a.Approvers, Deadline: a.Deadline, Schema: json.RawMessage(a.Schema),
	}
}

// Arguments is a call's arguments as approvers see them: JSON, each string cut to
// MaxArgumentText (marked), the whole to MaxArguments.
func Arguments(args map[string]any) string {
	raw, err := json.Marshal(cut(args))
	if err != nil {
		return fmt.Sprintf("(the arguments cannot be shown: %v)", err)
	}
	if len(raw) > MaxArguments {
		return string(raw[:MaxArguments]) + "…(cut)"
	}
	return string(raw)
}

func cut(v any) any {
	switch v := v.(type) {
	case string:
		return cutText(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = cut(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = cut(x)
		}
		return out
	}
	return v
}

// MayDecide reports whether user may decide approval a.
func MayDecide(a store.Approval, user string) bool {
	return user != "" && policy.MayDecide(a.Approvers, user, a.User)
}

// Get is approval id, if user may decide it; ErrNotFound otherwise.
func Get(ctx context.Context, st *store.Store, id, user string) (store.Approval, error) {
	a, err := st.GetApproval(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !MayDecide(a, user)) {
		return store.Approval{}, fmt.Errorf("approval %q: %w", id, ErrNotFound)
	}
	return a, err
}

// Decide records user's decision (approve or deny, with an optional note) on approval
// id. ErrNotFound when there is none that user may decide; store.ErrDecided (wrapped,
// with the approval as it stands) when it was decided already or its deadline passed.
//
// Approving an elicitation accepts it with an empty answer, which its schema must allow
// (Answer gives one).
func Decide(ctx context.Context, st *store.Store, id, user string, approve bool, note string, now time.Time) (store.Approval, error) {
	a, err := Get(ctx, st, id, user)
	if err != nil {
		return store.Approval{}, err
	}
	if approve && a.Kind == store.ApprovalKindElicitation {
		return Answer(ctx, st, id, user, map[string]any{}, now)
	}
	state := store.ApprovalDenied
	if approve {
		state = store.ApprovalApproved
	}
	return st.DecideApproval(ctx, id, state, user, note, now)
}

// Pending lists the pending approvals user may decide, newest first (session "" means
// every session's).
func Pending(ctx context.Context, st *store.Store, user, session string) ([]store.Approval, error) {
	all, err := st.ListApprovals(ctx, store.ApprovalFilter{State: store.ApprovalPending, SessionID: session})
	if err != nil {
		return nil, err
	}
	var out []store.Approval
	for _, a := range all {
		if MayDecide(a, user) {
			out = append(out, a)
		}
	}
	return out, nil
}
