package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The kinds of Window.
const (
	WindowPerTurn    = "per_turn"    // a counter per turn of a session
	WindowPerSession = "per_session" // a counter per session
	WindowPerDay     = "per_day"     // a counter per UTC calendar day
	WindowDuration   = "duration"    // a counter per fixed window of Every, from the Unix epoch
)

// The bounds of a duration window: at least a second, so that windows start on whole
// seconds, and at most a leap year, beyond which a typo ("1000h" for "100h") is likelier
// than a budget.
const (
	MinWindow = time.Second
	MaxWindow = 366 * 24 * time.Hour
)

// The per values, in the order their parts appear in a counter's key.
const (
	PerUser    = "user"
	PerOwner   = "owner"
	PerAgent   = "agent" // the agent's owner and name together
	PerSession = "session"
)

var (
	budgetFields = []string{"name", "users", "owners", "agents", "servers", "tools", "per", "window", "calls", "result_bytes", "tokens", "sandbox_seconds"}
	perValues    = []string{PerUser, PerOwner, PerAgent, PerSession}
	windowKinds  = []string{WindowPerTurn, WindowPerSession, WindowPerDay}
	budgetName   = lazyRegexp(`^[a-z0-9_-]{1,64}$`)
)

// Window is how long a budget's counter runs before it starts again.
type Window struct {
	Kind  string        // WindowPerTurn, WindowPerSession, WindowPerDay or WindowDuration
	Every time.Duration // for WindowDuration
}

// Bounds returns the window that contains now: when it started and when it ends (and
// the budget refills), in UTC. Turns and sessions are not times (the counter's key
// holds them, see Budget.Key), so for them both are zero.
func (w Window) Bounds(now time.Time) (start, end time.Time) {
	switch w.Kind {
	case WindowPerDay:
		y, m, d := now.UTC().Date()
		start = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 0, 1)
	case WindowDuration:
		if w.Every <= 0 {
			return time.Time{}, time.Time{}
		}
		// From the Unix epoch, not time.Truncate's zero time (year 1), so that every
		// replica, and the guide's reader, can work out the same windows.
		n, every := now.UnixNano(), int64(w.Every)
		q := n / every
		if n%every < 0 {
			q--
		}
		start = time.Unix(0, q*every).UTC()
		return start, start.Add(w.Every)
	}
	return time.Time{}, time.Time{}
}

// String is the window as the policy file writes it: "per_day", or the duration as Go
// spells it ("1h0m0s").
func (w Window) String() string {
	if w.Kind == WindowDuration {
		return w.Every.String()
	}
	return w.Kind
}

// Budget is a cumulative limit on what the calls or agents it matches spend in each
// window, counted separately per what Per lists.
type Budget struct {
	Name string
	// Per is what a counter is kept per (PerUser, PerOwner, PerAgent, PerSession), in
	// that order whatever the file's; empty: one counter for everything the budget
	// matches.
	Per    []string
	Window Window
	// The limits per counter and window; 0 is no limit. Calls and ResultBytes are spent
	// by MCP calls, Tokens (the model's, in and out) and SandboxSeconds by the agent.
	Calls, ResultBytes, Tokens, SandboxSeconds int64
	cond                                       conditions
}

// Subject is who and what a charge is for.
type Subject struct {
	User    string // the session's user
	Owner   string // the agent's owner
	Agent   string // the agent's name
	Session string
	Turn    string
	Server  string // an MCP call's server URL, as in Request
	Tool    string // an MCP call's tool: the server's own name, as in Request
}

// Budgets returns the budgets the policy declares, in the file's order. A nil Policy
// has none.
func (p *Policy) Budgets() []Budget {
	if p == nil || len(p.budgets) == 0 {
		return nil
	}
	out := slices.Clone(p.budgets)
	for i := range out {
		out[i].Per = slices.Clone(out[i].Per)
	}
	return out
}

// AppliesToCall reports whether an MCP call by s counts against b: b limits calls or
// result bytes and its conditions match s's user, owner, agent, server and tool.
func (b Budget) AppliesToCall(s Subject) bool {
	return (b.Calls > 0 || b.ResultBytes > 0) && b.cond.matchCall(s.User, s.Owner, s.Agent, s.Server, s.Tool)
}

// AppliesToAgent reports whether the model tokens and sandbox time the agent spends for
// s count against b: b limits tokens or sandbox seconds and its conditions match s's
// user, owner and agent. A budget with servers or tools never applies (Load refuses
// one with those limits): tokens and sandbox time are the turn's, not one tool's.
func (b Budget) AppliesToAgent(s Subject) bool {
	if b.cond.servers != nil || b.cond.tools != nil {
		return false
	}
	return (b.Tokens > 0 || b.SandboxSeconds > 0) && b.cond.matchAgent(s.User, s.Owner, s.Agent)
}

// Key is the key of b's counter that s is charged to, within b: "name=value" parts
// joined by ",", one for each of b.Per (PerAgent giving the owner and the name, since a
// name alone is its author's choice), then "session=" for a per_session window and
// "session=" and "turn=" for a per_turn one (a turn is counted within its session). The
// order is fixed, and "%", "=" and "," in values are escaped as %XX, so two subjects
// share a key only when they share the values b counts by. A budget kept per nothing
// over a time window has the key "".
func (b Budget) Key(s Subject) string {
	var parts []string
	add := func(name, value string) {
		part := name + "=" + escapeKey(value)
		if !slices.Contains(parts, part) {
			parts = append(parts, part)
		}
	}
	for _, per := range b.Per {
		switch per {
		case PerUser:
			add("user", s.User)
		case PerOwner:
			add("owner", s.Owner)
		case PerAgent:
			add("owner", s.Owner)
			add("agent", s.Agent)
		case PerSession:
			add("session", s.Session)
		}
	}
	switch b.Window.Kind {
	case WindowPerSession:
		add("session", s.Session)
	case WindowPerTurn:
		add("session", s.Session)
		add("turn", s.Turn)
	}
	return strings.Join(parts, ",")
}

// KeyUser is the user in s's key ("" when b is not kept per user), so that a user can
// be shown the counters that are theirs.
func (b Budget) KeyUser(s Subject) string {
	if slices.Contains(b.Per, PerUser) {
		return s.User
	}
	return ""
}

// escapeKey escapes the characters that separate a key's parts, and "%" itself, so
// that escaping is one-to-one.
func escapeKey(v string) string {
	if !strings.ContainsAny(v, "%=,") {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '%', '=', ',':
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ---- Parsing ----

func parseBudgets(raw json.RawMessage) ([]Budget, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf(`"budgets" must be a list of budget objects, like "budgets": [{"name": "prs_per_day", "tools": ["create_pull_request"], "per": ["user"], "window": "per_day", "calls": 20}], not %s`, clip(string(bytes.TrimSpace(raw))))
	}
	var out []Budget
	names := map[string]int{}
	for i, raw := range list {
		at := fmt.Sprintf("budgets[%d]", i)
		b, err := parseBudget(raw, at)
		if err != nil {
			return nil, err
		}
		if j, ok := names[b.Name]; ok {
			return nil, fmt.Errorf(`%s.name %q is also budgets[%d]'s: give each budget a name of its own (the name keys its counters and names it when it is spent)`, at, b.Name, j)
		}
		names[b.Name] = i
		out = append(out, b)
	}
	return out, nil
}

func parseBudget(data json.RawMessage, at string) (Budget, error) {
	var b Budget
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return b, fmt.Errorf(`%s: a budget must be a JSON object, like {"name": "prs_per_day", "tools": ["create_pull_request"], "per": ["user"], "window": "per_day", "calls": 20}`, at)
	}
	if _, ok := fields["args"]; ok {
		return b, fmt.Errorf(`%s.args: a budget counts calls whatever their arguments, so it has no "args": narrow it with "servers" and "tools", and use a rule to decide calls by their arguments`, at)
	}
	if err := knownFields(fields, budgetFields, at+".", "a budget"); err != nil {
		return b, err
	}
	raw, ok := fields["name"]
	if !ok {
		return b, fmt.Errorf(`%s.name is missing: add a name for the budget, like "name": "prs_per_day" (it keys the budget's counters and names it when it is spent)`, at)
	}
	if err := json.Unmarshal(raw, &b.Name); err != nil || !budgetName().MatchString(b.Name) {
		return b, fmt.Errorf(`%s.name is %s: a budget's name is 1 to 64 of a-z, 0-9, "_" and "-", like "prs_per_day"`, at, clip(string(bytes.TrimSpace(raw))))
	}
	var err error
	if b.cond, err = parseConditions(fields, at); err != nil {
		return b, err
	}
	if raw, ok := fields["per"]; ok {
		if b.Per, err = parsePer(raw, at+".per"); err != nil {
			return b, err
		}
	}
	raw, ok = fields["window"]
	if !ok {
		return b, fmt.Errorf(`%s.window is missing: add "window": "per_day" (the UTC calendar day), "per_session", "per_turn" or a duration like "1h" (fixed windows from the Unix epoch)`, at)
	}
	if b.Window, err = parseWindow(raw, at+".window"); err != nil {
		return b, err
	}
	for _, l := range []struct {
		name string
		into *int64
	}{{"calls", &b.Calls}, {"result_bytes", &b.ResultBytes}, {"tokens", &b.Tokens}, {"sandbox_seconds", &b.SandboxSeconds}} {
		if raw, ok := fields[l.name]; ok {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
			if err != nil || n <= 0 {
				return b, fmt.Errorf(`%s.%s is %s: a limit is a positive whole number, like "%s": 100 (leave it out for no limit)`, at, l.name, clip(string(bytes.TrimSpace(raw))), l.name)
			}
			*l.into = n
		}
	}
	if b.Calls == 0 && b.ResultBytes == 0 && b.Tokens == 0 && b.SandboxSeconds == 0 {
		return b, fmt.Errorf(`%s has no limit: add at least one of "calls", "result_bytes", "tokens" or "sandbox_seconds", like "calls": 20`, at)
	}
	if b.Tokens > 0 || b.SandboxSeconds > 0 {
		for _, f := range []string{"servers", "tools"} {
			if _, ok := fields[f]; ok {
				return b, fmt.Errorf(`%s.%s: a budget with "tokens" or "sandbox_seconds" cannot have %q: the model's tokens and the sandbox's time are spent by the agent's whole turn, not by one tool's calls. `+
					`Split it in two: one budget with %q and "calls" or "result_bytes", and one without %q for "tokens" and "sandbox_seconds"`, at, f, f, f, f)
			}
		}
	}
	return b, nil
}

// parsePer reads what a budget's counters are kept per, into the order of perValues.
func parsePer(raw json.RawMessage, at string) ([]string, error) {
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf(`%s must be a list of "user", "owner", "agent" or "session", like "per": ["user"], not %s`, at, clip(string(bytes.TrimSpace(raw))))
	}
	for i, v := range list {
		if !slices.Contains(perValues, v) {
			msg := fmt.Sprintf(`%s[%d] is %q: a counter is kept per "user", "owner", "agent" (the agent's owner and name) or "session"`, at, i, v)
			if s := closest(v, perValues); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			return nil, errors.New(msg)
		}
	}
	var per []string
	for _, v := range perValues {
		if slices.Contains(list, v) {
			per = append(per, v)
		}
	}
	return per, nil
}

func parseWindow(raw json.RawMessage, at string) (Window, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return Window{}, fmt.Errorf(`%s must be a string: "per_day", "per_session", "per_turn" or a duration like "1h", not %s`, at, clip(string(bytes.TrimSpace(raw))))
	}
	if slices.Contains(windowKinds, s) {
		return Window{Kind: s}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		msg := fmt.Sprintf(`%s is %q: write "per_day" (the UTC calendar day), "per_session", "per_turn" or a duration like "1h" (fixed windows from the Unix epoch)`, at, s)
		if c := closest(s, windowKinds); c != "" {
			msg += fmt.Sprintf("; did you mean %q?", c)
		}
		return Window{}, errors.New(msg)
	}
	if d < MinWindow || d > MaxWindow || d%time.Second != 0 {
		return Window{}, fmt.Errorf(`%s is %q: a duration window is a whole number of seconds from 1s to 8784h (366 days); for the UTC calendar day write "per_day"`, at, s)
	}
	return Window{Kind: WindowDuration, Every: d}, nil
}

// lazyRegexp returns a function that compiles expr the first time it is called, so that
// starting a program that links this package does not compile it (the local sandbox's
// init is such a program, started for each sandbox).
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
