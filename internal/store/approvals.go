package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// migrationGovernance (17): approvals and cumulative budgets of the harness's MCP calls
// and code (issue 26).
//
// An approval is a call the operator's policy holds until a person decides it. The
// approval lives in the database, not in the memory of the replica that asked, because
// the person deciding talks to whichever replica the load balancer picks, and because a
// decision must be made once: approvals.state moves from pending exactly once, by one
// conditional update (DecideApproval), whatever number of replicas and people race. The
// index on (state, deadline) serves the sweep that expires pending approvals whose
// deadline passed; the one on session_id a session's list. An approval goes with its
// session (ON DELETE CASCADE, like the session's events).
//
// budget_usage holds one counter per budget, key (whom it counts: a user, an agent, a
// session) and window (window_start, 0 for windows that are keys themselves): the
// calls, bytes, tokens and sandbox time spent in it. Its primary key is what
// ChargeBudget's single upsert conflicts on, so every replica and session charging one
// counter meets on one row and the database, not a read-then-write in Go, decides
// whether a charge still fits (budgets.go). Rows of windows that ended are kept for
// listing until PruneBudgetUsage; the index on window_end serves it, the one on
// user_name a user's own usage.
//
// Both tables are the harness's (runtimeTables): teams have no access, and there is no
// row-level security, the harness service enforcing whose rows a user may see.
var migrationGovernance = migration{sql: `
CREATE TABLE approvals (
	id           TEXT PRIMARY KEY,
	session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	run_id       TEXT NOT NULL DEFAULT '',
	tool_call_id TEXT NOT NULL DEFAULT '',
	user_name    TEXT NOT NULL DEFAULT '',
	agent        TEXT NOT NULL DEFAULT '',
	owner        TEXT NOT NULL DEFAULT '',
	kind         TEXT NOT NULL,
	server       TEXT NOT NULL DEFAULT '',
	tool         TEXT NOT NULL DEFAULT '',
	arguments    TEXT NOT NULL DEFAULT '',
	code         TEXT NOT NULL DEFAULT '',
	language     TEXT NOT NULL DEFAULT '',
	rule         BIGINT NOT NULL DEFAULT 0,
	reason       TEXT NOT NULL DEFAULT '',
	approvers    TEXT NOT NULL DEFAULT '[]',
	created_at   BIGINT NOT NULL,
	deadline     BIGINT NOT NULL,
	state        TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired', 'cancelled')),
	decided_by   TEXT NOT NULL DEFAULT '',
	decided_at   BIGINT NOT NULL DEFAULT 0,
	note         TEXT NOT NULL DEFAULT '',
	schema       TEXT NOT NULL DEFAULT '',
	response     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX approvals_state_deadline ON approvals(state, deadline);
CREATE INDEX approvals_session ON approvals(session_id);
CREATE TABLE budget_usage (
	budget       TEXT NOT NULL,
	key          TEXT NOT NULL,
	user_name    TEXT NOT NULL DEFAULT '',
	window_start BIGINT NOT NULL DEFAULT 0,
	window_end   BIGINT NOT NULL DEFAULT 0,
	calls        BIGINT NOT NULL DEFAULT 0,
	bytes        BIGINT NOT NULL DEFAULT 0,
	tokens       BIGINT NOT NULL DEFAULT 0,
	sandbox_ms   BIGINT NOT NULL DEFAULT 0,
	updated_at   BIGINT NOT NULL,
	PRIMARY KEY (budget, key, window_start)
);
CREATE INDEX budget_usage_user ON budget_usage(user_name, window_start);
CREATE INDEX budget_usage_end ON budget_usage(window_end);
`}

// Approval states. Pending is the only state an approval leaves, once.
const (
	ApprovalPending   = "pending"
	ApprovalApproved  = "approved"
	ApprovalDenied    = "denied"
	ApprovalExpired   = "expired"   // the deadline passed: a denial
	ApprovalCancelled = "cancelled" // the turn was cancelled while it waited: a denial
)

// Approval kinds: what is held for a decision.
const (
	ApprovalKindMCPCall = "mcp_call"
	ApprovalKindCode    = "code"
	// ApprovalKindElicitation is an MCP server's question to the session's user
	// (elicitation/create): approved is "accept" with the user's answer in Response,
	// denied is "decline".
	ApprovalKindElicitation = "elicitation"
)

// ErrDecided means the approval is no longer pending (someone decided it first, or the
// harness expired or cancelled it), or, for a person's decision, its deadline passed.
var ErrDecided = errors.New("already decided")

// Approval is a row of approvals: one held call and its decision.
type Approval struct {
	ID         string // chosen by the caller (random)
	SessionID  string
	RunID      string
	ToolCallID string
	User       string // the session's user (the caller)
	Agent      string
	Owner      string // the agent's owner
	Kind       string // ApprovalKindMCPCall or ApprovalKindCode
	Server     string // MCP server URL ("" for code)
	Tool       string // the server's tool name, or "run_code"/"exec"
	Arguments  string // JSON text, as the approver sees it
	Code       string // the code to approve (kind "code"), else ""
	Language   string
	Rule       int
	Reason     string
	Approvers  []string // patterns as the policy wrote them ("$caller" kept literally)
	CreatedAt  time.Time
	Deadline   time.Time // required: a held call never waits forever
	State      string
	DecidedBy  string
	DecidedAt  time.Time // zero while pending
	Note       string
	// Schema is the JSON schema of the answer an elicitation asks for; Response the
	// answer (JSON) its user gave when accepting it. Both "" for other kinds.
	Schema   string
	Response string
}

// approvalColumns are the columns scanApproval reads, in its order.
const approvalColumns = `id, session_id, run_id, tool_call_id, user_name, agent, owner, kind, server, tool, arguments, code, language,
	rule, reason, approvers, created_at, deadline, state, decided_by, decided_at, note, schema, response`

func scanApproval(sc scanner) (Approval, error) {
	var a Approval
	var approvers string
	var created, deadline, decided int64
	err := sc.Scan(&a.ID, &a.SessionID, &a.RunID, &a.ToolCallID, &a.User, &a.Agent, &a.Owner, &a.Kind, &a.Server, &a.Tool, &a.Arguments, &a.Code, &a.Language,
		&a.Rule, &a.Reason, &approvers, &created, &deadline, &a.State, &a.DecidedBy, &decided, &a.Note, &a.Schema, &a.Response)
	if err != nil {
		return a, err
	}
	if err := json.Unmarshal([]byte(approvers), &a.Approvers); err != nil {
		return a, fmt.Errorf("approvers of approval %q: %w", a.ID, err)
	}
	a.CreatedAt, a.Deadline, a.DecidedAt = time.UnixMilli(created), time.UnixMilli(deadline), fromMillis(decided)
	return a, nil
}

// andEqual adds "AND column = value" to query, which has a WHERE, and value to its
// args, when value is set: a list's optional filter, where "" means any.
func andEqual(query string, args []any, column, value string) (string, []any) {
	if value == "" {
		return query, args
	}
	return query + ` AND ` + column + ` = ?`, append(args, value)
}

// fromMillis is the time a column of unix milliseconds holds, where 0 means none (the
// zero time).
func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// millis is t as a column of unix milliseconds, where the zero time is 0.
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// CreateApproval stores a pending approval. Its state is pending whatever a.State says,
// and CreatedAt is the store's clock when zero. ErrAlreadyExists when the id is taken;
// ErrNotFound when the session does not exist.
func (s *Store) CreateApproval(ctx context.Context, a Approval) error {
	if a.ID == "" || a.Deadline.IsZero() {
		return fmt.Errorf("creating approval %q: an approval needs an id and a deadline", a.ID)
	}
	approvers := a.Approvers
	if approvers == nil {
		approvers = []string{} // "[]", never "null"
	}
	list, err := json.Marshal(approvers)
	if err != nil {
		return fmt.Errorf("creating approval %q: %w", a.ID, err)
	}
	created := a.CreatedAt.UnixMilli()
	if a.CreatedAt.IsZero() {
		created = s.stamp()
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO approvals(`+approvalColumns+`) VALUES (`+placeholders(24)+`)`,
		a.ID, a.SessionID, a.RunID, a.ToolCallID, a.User, a.Agent, a.Owner, a.Kind, a.Server, a.Tool, a.Arguments, a.Code, a.Language,
		a.Rule, a.Reason, string(list), created, a.Deadline.UnixMilli(), ApprovalPending, "", 0, "", a.Schema, "")
	return inserted(err, notFound("session %q", a.SessionID), "approval %q", a.ID)
}

// GetApproval reads one approval (ErrNotFound when there is none).
func (s *Store) GetApproval(ctx context.Context, id string) (Approval, error) {
	a, err := scanApproval(s.db.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = ?`, id))
	return found(a, err, "reading", "approval %q", id)
}

// DecideApproval is the one conditional update that decides an approval: it moves a
// pending approval to state (approved, denied, expired or cancelled), recording by, note
// and at. A person's decision (approved, denied) also needs at < Deadline: past it the
// call is as good as expired, even before the harness's sweep marks it so, while the
// harness's own expired and cancelled are taken at any time. Exactly one of two
// concurrent deciders wins, on any number of replicas: the update's condition is
// evaluated on the row as the winner left it (SQLite runs one writer at a time, and
// PostgreSQL re-checks an updated row's condition after the lock), so the loser gets
// ErrDecided (wrapped) and the row as it is. ErrNotFound when there is no such id.
// Returns the approval as decided.
func (s *Store) DecideApproval(ctx context.Context, id, state, by, note string, at time.Time) (Approval, error) {
	return s.decideApproval(ctx, id, state, by, note, "", at)
}

// AnswerApproval accepts elicitation id with the user's answer (response, JSON): an
// approval by by, under DecideApproval's rules.
func (s *Store) AnswerApproval(ctx context.Context, id, by, response string, at time.Time) (Approval, error) {
	return s.decideApproval(ctx, id, ApprovalApproved, by, "", response, at)
}

func (s *Store) decideApproval(ctx context.Context, id, state, by, note, response string, at time.Time) (Approval, error) {
	person := state == ApprovalApproved || state == ApprovalDenied
	if !person && state != ApprovalExpired && state != ApprovalCancelled {
		return Approval{}, fmt.Errorf("deciding approval %q: %q is not a decision (approved, denied, expired or cancelled)", id, state)
	}
	q := `UPDATE approvals SET state = ?, decided_by = ?, decided_at = ?, note = ?, response = ? WHERE id = ? AND state = ?`
	args := []any{state, by, at.UnixMilli(), note, response, id, ApprovalPending}
	if person {
		q += ` AND deadline > ?`
		args = append(args, at.UnixMilli())
	}
	a, err := scanApproval(s.db.QueryRowContext(ctx, q+` RETURNING `+approvalColumns, args...))
	if !errors.Is(err, sql.ErrNoRows) {
		if err != nil {
			return Approval{}, fmt.Errorf("deciding approval %q: %w", id, err)
		}
		return a, nil
	}
	// Nothing changed: say why, from the row as it stands.
	cur, err := s.GetApproval(ctx, id)
	switch {
	case err != nil:
		return cur, err
	case cur.State != ApprovalPending:
		return cur, fmt.Errorf("deciding approval %q: it was %s by %q: %w", id, cur.State, cur.DecidedBy, ErrDecided)
	}
	return cur, fmt.Errorf("deciding approval %q: its deadline passed (%s): %w", id, cur.Deadline.UTC().Format(time.RFC3339), ErrDecided)
}

// ApprovalFilter selects approvals to list; a zero field selects any.
type ApprovalFilter struct {
	SessionID string
	User      string
	State     string
	// DeadlineBefore, when set, keeps approvals whose deadline is before it: with State
	// pending, the ones the harness's sweep is to expire (the (state, deadline) index).
	DeadlineBefore time.Time
	Limit          int
}

// ListApprovals lists the approvals f selects, newest first.
func (s *Store) ListApprovals(ctx context.Context, f ApprovalFilter) ([]Approval, error) {
	q, args := `SELECT `+approvalColumns+` FROM approvals WHERE 1 = 1`, []any{}
	q, args = andEqual(q, args, "session_id", f.SessionID)
	q, args = andEqual(q, args, "user_name", f.User)
	q, args = andEqual(q, args, "state", f.State)
	if !f.DeadlineBefore.IsZero() {
		q, args = q+` AND deadline < ?`, append(args, f.DeadlineBefore.UnixMilli())
	}
	q += ` ORDER BY created_at DESC, id DESC`
	if f.Limit > 0 {
		q, args = q+` LIMIT ?`, append(args, f.Limit)
	}
	list, err := queryRows(ctx, s.db, scanApproval, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	return list, nil
}
