package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Usage (issue 30) is what agents spent over a window, read from the session event log:
// tokens per model (the usage event of each model step, with the model its
// model_message named), sandbox time per environment (the sandbox lifecycle events:
// running from sandbox_provisioned, _resumed or _recovered until sandbox_stopped,
// _archived, _deleted or _lost, cut to the window), and MCP calls per server (the
// mcp_call events the Code Mode bridge records). Each is grouped per agent and per user
// (the session's owner). Nothing is kept besides the log: a deleted session's usage goes
// with it.

// migrationUsageIndex (27): the usage queries select events by kind and time, which the
// log's key (session, seq) cannot answer without reading every event. One index serves
// all three (usage, mcp_call and the sandbox lifecycle kinds).
var migrationUsageIndex = migration{sql: `
CREATE INDEX session_events_kind_time ON session_events(kind, created_at);
`}

// MaxUsageWindow bounds a usage query's window, so that one request reads at most about
// three months of the log (the index keeps it to the events it reports).
const MaxUsageWindow = 93 * 24 * time.Hour

// ErrUsageWindow is a window that is empty, reversed or longer than MaxUsageWindow.
var ErrUsageWindow = errors.New("usage window")

// ErrUsageNotReadable: this database role may not read the session event log (a team
// role on PostgreSQL reads its agents' sessions, never their events).
var ErrUsageNotReadable = errors.New("usage needs the session event log")

// UsageFilter selects what a usage query reports: the window [From, To), and, when
// set, one user's sessions and one agent's.
type UsageFilter struct {
	From, To    time.Time
	User, Agent string
}

// Usage is what was spent in a window.
type Usage struct {
	From, To  time.Time
	Tokens    []TokenUsage
	Sandboxes []SandboxUsage
	MCP       []MCPUsage
}

// TokenUsage is the tokens one agent spent for one user on one model.
type TokenUsage struct {
	Agent, User, Model        string
	InputTokens, OutputTokens int64
	Steps                     int64 // model steps
}

// SandboxUsage is the time one agent's sandboxes ran for one user on one environment.
type SandboxUsage struct {
	Agent, User, Environment string
	Running                  time.Duration
}

// MCPUsage is the MCP calls one agent made for one user to one server. Calls counts
// every call once (a late record of a call already counted is not another call);
// Errors those that failed, ended unknown, or whose tool answered an error; Refused
// those the policy, an approval or a budget refused before they were sent.
type MCPUsage struct {
	Agent, User, Server    string
	Calls, Errors, Refused int64
}

// Sandbox lifecycle kinds (package events), as the usage query reads them: the store
// does not import the harness's event types.
var (
	sandboxStarts = []string{"sandbox_provisioned", "sandbox_resumed", "sandbox_recovered"}
	sandboxEnds   = []string{"sandbox_stopped", "sandbox_archived", "sandbox_deleted", "sandbox_lost"}
)

// CheckUsageWindow refuses a window that is empty, reversed or longer than
// MaxUsageWindow.
func CheckUsageWindow(from, to time.Time) error {
	switch {
	case from.IsZero() || to.IsZero():
		return fmt.Errorf("%w: both ends are needed", ErrUsageWindow)
	case !to.After(from):
		return fmt.Errorf("%w: it ends (%s) before it starts (%s)", ErrUsageWindow, to.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339))
	case to.Sub(from) > MaxUsageWindow:
		return fmt.Errorf("%w: %s is longer than the longest window, %d days", ErrUsageWindow, to.Sub(from).Round(time.Hour), int(MaxUsageWindow.Hours()/24))
	}
	return nil
}

// Usage reports what was spent in f's window. On PostgreSQL a role that may not read
// the event log gets ErrUsageNotReadable rather than a permission error.
func (s *Store) Usage(ctx context.Context, f UsageFilter) (Usage, error) {
	if err := CheckUsageWindow(f.From, f.To); err != nil {
		return Usage{}, err
	}
	if err := s.canReadEvents(ctx); err != nil {
		return Usage{}, err
	}
	u := Usage{From: f.From, To: f.To}
	var err error
	if u.Tokens, err = s.tokenUsage(ctx, f); err != nil {
		return Usage{}, fmt.Errorf("reading token usage: %w", err)
	}
	if u.Sandboxes, err = s.sandboxUsage(ctx, f); err != nil {
		return Usage{}, fmt.Errorf("reading sandbox usage: %w", err)
	}
	if u.MCP, err = s.mcpUsage(ctx, f); err != nil {
		return Usage{}, fmt.Errorf("reading MCP usage: %w", err)
	}
	return u, nil
}

func (s *Store) canReadEvents(ctx context.Context) error {
	if s.db.dialect != postgres {
		return nil
	}
	var ok bool
	if err := s.db.QueryRowContext(ctx, `SELECT has_table_privilege(current_user, 'session_events', 'SELECT')`).Scan(&ok); err != nil {
		return fmt.Errorf("checking whether this role reads the event log: %w", err)
	}
	if !ok {
		return fmt.Errorf("%w, which only harness roles read: connect as a member of %s, or ask the harness's API (GET /api/v1/usage)", ErrUsageNotReadable, HarnessGroup)
	}
	return nil
}

// jsonText is the SQL for the text at path (keys) in the JSON column col.
func (d dialect) jsonText(col string, keys ...string) string {
	if d == postgres {
		return "(" + col + "::jsonb #>> '{" + strings.Join(keys, ",") + "}')"
	}
	return "json_extract(" + col + ", '$." + strings.Join(keys, ".") + "')"
}

// jsonInt is the SQL for the integer at keys in col, 0 when absent.
func (d dialect) jsonInt(col string, keys ...string) string {
	if d == postgres {
		return "COALESCE(" + d.jsonText(col, keys...) + "::bigint, 0)"
	}
	return "COALESCE(" + d.jsonText(col, keys...) + ", 0)"
}

// jsonFlag is the SQL for the boolean at keys in col as 1 or 0 (0 when absent).
func (d dialect) jsonFlag(col string, keys ...string) string {
	if d == postgres {
		return "(CASE WHEN COALESCE(" + d.jsonText(col, keys...) + "::boolean, false) THEN 1 ELSE 0 END)"
	}
	return "COALESCE(" + d.jsonText(col, keys...) + ", 0)"
}

// usageWhere narrows a query over session events e of sessions s to f's user and agent.
func usageWhere(q string, args []any, f UsageFilter) (string, []any) {
	if f.User != "" {
		q += ` AND s.owner = ?`
		args = append(args, f.User)
	}
	if f.Agent != "" {
		q += ` AND s.agent = ?`
		args = append(args, f.Agent)
	}
	return q, args
}

func (s *Store) tokenUsage(ctx context.Context, f UsageFilter) ([]TokenUsage, error) {
	d := s.db.dialect
	// The runner commits each step's model_message and usage together, usage right after
	// (seq + 1): the model is the one that message names.
	q := `SELECT s.agent, s.owner, COALESCE(` + d.jsonText("m.payload", "model") + `, ''),
		SUM(` + d.jsonInt("e.payload", "step", "input_tokens") + `), SUM(` + d.jsonInt("e.payload", "step", "output_tokens") + `), COUNT(*)
		FROM session_events e JOIN sessions s ON s.id = e.session_id
		LEFT JOIN session_events m ON m.session_id = e.session_id AND m.seq = e.seq - 1 AND m.kind = 'model_message'
		WHERE e.kind = 'usage' AND e.created_at >= ? AND e.created_at < ?`
	q, args := usageWhere(q, []any{f.From.UnixMilli(), f.To.UnixMilli()}, f)
	q += ` GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`
	return queryRows(ctx, s.db, func(sc scanner) (TokenUsage, error) {
		var t TokenUsage
		err := sc.Scan(&t.Agent, &t.User, &t.Model, &t.InputTokens, &t.OutputTokens, &t.Steps)
		return t, err
	}, q, args...)
}

// mcpSeparator joins a server's name and a tool's name in a bridged call's tool
// (mcptools.Separator, which the store does not import).
const mcpSeparator = "__"

func (s *Store) mcpUsage(ctx context.Context, f UsageFilter) ([]MCPUsage, error) {
	d := s.db.dialect
	q := `SELECT s.agent, s.owner, COALESCE(` + d.jsonText("e.payload", "tool") + `, ''), COALESCE(` + d.jsonText("e.payload", "outcome") + `, ''),
		` + d.jsonFlag("e.payload", "is_error") + `, COUNT(*)
		FROM session_events e JOIN sessions s ON s.id = e.session_id
		WHERE e.kind = 'mcp_call' AND e.created_at >= ? AND e.created_at < ? AND ` + d.jsonFlag("e.payload", "late") + ` = 0`
	q, args := usageWhere(q, []any{f.From.UnixMilli(), f.To.UnixMilli()}, f)
	q += ` GROUP BY 1, 2, 3, 4, 5`
	type row struct {
		agent, user, tool, outcome string
		isError, n                 int64
	}
	rows, err := queryRows(ctx, s.db, func(sc scanner) (row, error) {
		var r row
		err := sc.Scan(&r.agent, &r.user, &r.tool, &r.outcome, &r.isError, &r.n)
		return r, err
	}, q, args...)
	if err != nil {
		return nil, err
	}
	byKey := map[[3]string]*MCPUsage{}
	for _, r := range rows {
		server, _, _ := strings.Cut(r.tool, mcpSeparator)
		k := [3]string{r.agent, r.user, server}
		m := byKey[k]
		if m == nil {
			m = &MCPUsage{Agent: r.agent, User: r.user, Server: server}
			byKey[k] = m
		}
		m.Calls += r.n
		switch {
		case r.outcome == "denied" || r.outcome == "limit":
			m.Refused += r.n
		case r.outcome == "failed" || r.outcome == "unknown" || r.isError != 0:
			m.Errors += r.n
		}
	}
	out := make([]MCPUsage, 0, len(byKey))
	for _, m := range byKey {
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b MCPUsage) int {
		return cmp.Or(cmp.Compare(a.Agent, b.Agent), cmp.Compare(a.User, b.User), cmp.Compare(a.Server, b.Server))
	})
	return out, nil
}
