// Package budgets charges the operator's cumulative budgets (the policy file's
// "budgets") in the control-plane database: MCP calls and the bytes of their results,
// the model's tokens, and sandbox time. Every counter is a row charged by one
// conditional statement (store.ChargeBudget), so two sessions and two harness replicas
// share one budget and never both pass its limit.
//
// What is checked when:
//   - a call (calls): before it is sent, counted at once; refused, and sent nowhere,
//     when the budget has no call left;
//   - result bytes, tokens and sandbox seconds are known only afterwards: they are
//     charged when spent, and once a counter reaches its limit the next call, model
//     step or sandbox call is refused until the window refills. A last call may so go
//     past a limit by its own size, never a second one.
//
// A call that several budgets apply to is charged to each in the policy's order; when
// a later one refuses it, the earlier ones are refunded, so a refused call costs
// nothing.
package budgets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Source is where the budgets come from (policy.Policy; a nil *Policy has none).
type Source interface {
	Budgets() []policy.Budget
}

// Meter charges budgets (mcptools.Budgets for calls; the runner for tokens and sandbox
// time).
type Meter struct {
	Store  *store.Store
	Policy Source
	Logger *slog.Logger
	// Now is the clock of windows; nil means time.Now.
	Now func() time.Time
}

// Exceeded is a refusal by a budget: which budget, which of its limits, its window and
// when it refills. It wraps mcptools.ErrOverBudget.
type Exceeded struct {
	Budget    string
	Key       string
	Dimension string // "calls", "result_bytes", "tokens" or "sandbox_seconds"
	Used      int64
	Limit     int64
	Window    policy.Window
	Refill    time.Time // zero for per_turn and per_session: the next turn or session
}

func (e *Exceeded) Error() string {
	s := fmt.Sprintf("budget %q", e.Budget)
	if e.Key != "" {
		s += " (" + e.Key + ")"
	}
	s += fmt.Sprintf(" has used %d of its %d %s %s", e.Used, e.Limit, unit(e.Dimension), windowText(e.Window))
	switch {
	case !e.Refill.IsZero():
		s += "; it refills at " + e.Refill.UTC().Format(time.RFC3339)
	case e.Window.Kind == policy.WindowPerTurn:
		s += "; it refills at the next turn"
	case e.Window.Kind == policy.WindowPerSession:
		s += "; it refills in a new session"
	}
	return s
}

func (e *Exceeded) Unwrap() error { return mcptools.ErrOverBudget }

func unit(dim string) string {
	switch dim {
	case "result_bytes":
		return "bytes of results"
	case "sandbox_seconds":
		return "sandbox seconds"
	}
	return dim
}

func windowText(w policy.Window) string {
	switch w.Kind {
	case policy.WindowPerTurn:
		return "per turn"
	case policy.WindowPerSession:
		return "per session"
	case policy.WindowPerDay:
		return "per day (UTC)"
	}
	return "per " + w.Every.String()
}

func (m *Meter) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Meter) budgets() []policy.Budget {
	if m == nil || m.Policy == nil {
		return nil
	}
	return m.Policy.Budgets()
}

// charge is one budget's charge for s: its counter, what to add and its limits.
func (m *Meter) charge(b policy.Budget, s policy.Subject, add store.BudgetLimits, check bool) store.BudgetCharge {
	start, end := b.Window.Bounds(m.now())
	return store.BudgetCharge{
		Budget: b.Name, Key: b.Key(s), User: b.KeyUser(s), WindowStart: start, WindowEnd: end,
		Calls: add.Calls, Bytes: add.Bytes, Tokens: add.Tokens, SandboxMS: add.SandboxMS,
		Limits: store.BudgetLimits{Calls: b.Calls, Bytes: b.ResultBytes, Tokens: b.Tokens, SandboxMS: b.SandboxSeconds * 1000},
		Check:  check,
	}
}

// exceeded names the limit of b that usage u reached.
func exceeded(b policy.Budget, c store.BudgetCharge, u store.BudgetUsage) *Exceeded {
	e := &Exceeded{Budget: b.Name, Key: c.Key, Window: b.Window, Refill: c.WindowEnd}
	switch {
	case b.Calls > 0 && u.Calls+c.Calls > b.Calls:
		e.Dimension, e.Used, e.Limit = "calls", u.Calls, b.Calls
	case b.ResultBytes > 0 && u.Bytes >= b.ResultBytes:
		e.Dimension, e.Used, e.Limit = "result_bytes", u.Bytes, b.ResultBytes
	case b.Tokens > 0 && u.Tokens >= b.Tokens:
		e.Dimension, e.Used, e.Limit = "tokens", u.Tokens, b.Tokens
	default:
		e.Dimension, e.Used, e.Limit = "sandbox_seconds", u.SandboxMS/1000, b.SandboxSeconds
	}
	return e
}

// admit charges add (with the limits checked) to every budget applies selects for s,
// refunding the ones charged before a refusal.
func (m *Meter) admit(ctx context.Context, s policy.Subject, applies func(policy.Budget) bool, add store.BudgetLimits) error {
	var done []store.BudgetCharge
	for _, b := range m.budgets() {
		if !applies(b) {
			continue
		}
		c := m.charge(b, s, add, true)
		u, ok, err := m.Store.ChargeBudget(ctx, c)
		if err == nil && ok {
			done = append(done, c)
			continue
		}
		m.refund(ctx, done)
		if err != nil {
			return fmt.Errorf("charging budget %q: %w", b.Name, err)
		}
		return exceeded(b, c, u)
	}
	return nil
}

// refund takes back charges a refused call made to other budgets.
func (m *Meter) refund(ctx context.Context, charges []store.BudgetCharge) {
	for _, c := range charges {
		if err := m.Store.RefundBudget(context.WithoutCancel(ctx), c); err != nil {
			m.log().Warn("refunding a budget charge", "budget", c.Budget, "key", c.Key, "err", err)
		}
	}
}

// spend charges add without a check: what was spent already.
func (m *Meter) spend(ctx context.Context, s policy.Subject, applies func(policy.Budget) bool, add store.BudgetLimits) {
	for _, b := range m.budgets() {
		if !applies(b) {
			continue
		}
		if _, _, err := m.Store.ChargeBudget(context.WithoutCancel(ctx), m.charge(b, s, add, false)); err != nil {
			m.log().Warn("charging a budget", "budget", b.Name, "err", err)
		}
	}
}

// Admit charges one MCP call by s, or refuses it (an *Exceeded) charging nothing.
func (m *Meter) Admit(ctx context.Context, s policy.Subject) error {
	return m.admit(ctx, s, func(b policy.Budget) bool { return b.AppliesToCall(s) }, store.BudgetLimits{Calls: 1})
}

// Spent charges the bytes of a call's result.
func (m *Meter) Spent(ctx context.Context, s policy.Subject, resultBytes int64) {
	m.spend(ctx, s, func(b policy.Budget) bool { return b.AppliesToCall(s) && b.ResultBytes > 0 }, store.BudgetLimits{Bytes: max(resultBytes, 0)})
}

// AdmitTokens refuses a model step for s once a token budget is spent.
func (m *Meter) AdmitTokens(ctx context.Context, s policy.Subject) error {
	return m.admit(ctx, s, func(b policy.Budget) bool { return b.AppliesToAgent(s) && b.Tokens > 0 }, store.BudgetLimits{})
}

// SpendTokens charges the tokens (in and out) of a model step.
func (m *Meter) SpendTokens(ctx context.Context, s policy.Subject, tokens int64) {
	m.spend(ctx, s, func(b policy.Budget) bool { return b.AppliesToAgent(s) && b.Tokens > 0 }, store.BudgetLimits{Tokens: max(tokens, 0)})
}

// AdmitSandbox refuses a sandbox call for s once a sandbox-time budget is spent.
func (m *Meter) AdmitSandbox(ctx context.Context, s policy.Subject) error {
	return m.admit(ctx, s, func(b policy.Budget) bool { return b.AppliesToAgent(s) && b.SandboxSeconds > 0 }, store.BudgetLimits{})
}

// SpendSandbox charges sandbox running time.
func (m *Meter) SpendSandbox(ctx context.Context, s policy.Subject, d time.Duration) {
	m.spend(ctx, s, func(b policy.Budget) bool { return b.AppliesToAgent(s) && b.SandboxSeconds > 0 }, store.BudgetLimits{SandboxMS: max(d.Milliseconds(), 0)})
}

func (m *Meter) log() *slog.Logger {
	if m.Logger != nil {
		return m.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// IsExceeded reports whether err is a budget's refusal, and which.
func IsExceeded(err error) (*Exceeded, bool) {
	var e *Exceeded
	ok := errors.As(err, &e)
	return e, ok
}
