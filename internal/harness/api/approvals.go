package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/approvals"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Approvals and budgets: the people a policy rule names decide the calls that wait for
// them (any replica serves the decision: the waiting call reads it from the store), and
// each user sees the cumulative budgets charged to them.

// approvalJSON is an approval as the API shows it to a user who may decide it.
type approvalJSON struct {
	ID         string     `json:"id"`
	SessionID  string     `json:"session_id"`
	ToolCallID string     `json:"tool_call_id"`
	User       string     `json:"user"`
	Agent      string     `json:"agent"`
	Kind       string     `json:"kind"`
	Server     string     `json:"server,omitempty"`
	Tool       string     `json:"tool"`
	Arguments  string     `json:"arguments,omitempty"`
	Code       string     `json:"code,omitempty"`
	Language   string     `json:"language,omitempty"`
	Rule       int        `json:"rule"`
	Reason     string     `json:"reason,omitempty"`
	Approvers  []string   `json:"approvers"`
	CreatedAt  time.Time  `json:"created_at"`
	Deadline   time.Time  `json:"deadline"`
	State      string     `json:"state"`
	DecidedBy  string     `json:"decided_by,omitempty"`
	DecidedAt  *time.Time `json:"decided_at,omitempty"`
	Note       string     `json:"note,omitempty"`
	// Schema is what an elicitation asks for (a JSON schema); Response the accepted
	// answer.
	Schema   json.RawMessage `json:"schema,omitempty"`
	Response json.RawMessage `json:"response,omitempty"`
}

func approvalOf(a store.Approval) approvalJSON {
	j := approvalJSON{ID: a.ID, SessionID: a.SessionID, ToolCallID: a.ToolCallID, User: a.User, Agent: a.Agent, Kind: a.Kind,
		Server: a.Server, Tool: a.Tool, Arguments: a.Arguments, Code: a.Code, Language: a.Language, Rule: a.Rule, Reason: a.Reason,
		Approvers: a.Approvers, CreatedAt: a.CreatedAt.UTC(), Deadline: a.Deadline.UTC(), State: a.State, DecidedBy: a.DecidedBy, Note: a.Note,
		Schema: json.RawMessage(a.Schema), Response: json.RawMessage(a.Response)}
	if !a.DecidedAt.IsZero() {
		at := a.DecidedAt.UTC()
		j.DecidedAt = &at
	}
	return j
}

// listApprovals lists the pending approvals the caller may decide, of every session
// (?session= narrows to one).
func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, c *caller) error {
	list, err := approvals.Pending(r.Context(), s.cfg.Store, c.user.Name, r.URL.Query().Get("session"))
	if err != nil {
		return err
	}
	out := make([]approvalJSON, 0, len(list))
	for _, a := range list {
		out = append(out, approvalOf(a))
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": out})
	return nil
}

// getApproval shows one approval the caller may decide (pending or not).
func (s *Server) getApproval(w http.ResponseWriter, r *http.Request, c *caller) error {
	id := r.PathValue("id")
	a, err := approvals.Get(r.Context(), s.cfg.Store, id, c.user.Name)
	return answerApproval(w, id, a, err)
}

// answerApproval answers a read or a decision of approval id: the approval, or err as
// its status says (404 for one the caller may not see, 409 for one decided already,
// 422 for an answer that does not fit a question).
func answerApproval(w http.ResponseWriter, id string, a store.Approval, err error) error {
	switch {
	case errors.Is(err, approvals.ErrNotFound):
		return notFound("approval " + quote(id))
	case errors.Is(err, store.ErrDecided):
		return &Error{Status: http.StatusConflict, Code: CodeDecided, Message: "approval " + id + " cannot be decided: " + err.Error()}
	case errors.Is(err, approvals.ErrBadAnswer):
		return errorf(http.StatusUnprocessableEntity, CodeUnprocessable, "approval %s: %v", id, err)
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, approvalOf(a))
	return nil
}

// DecisionRequest is the body of POST /api/v1/approvals/{id}.
type DecisionRequest struct {
	// Decision is "approve" or "deny" for a held call; "accept" (with Content) or
	// "decline" for an elicitation (approve and deny mean the same there).
	Decision string         `json:"decision"`
	Note     string         `json:"note"`
	Content  map[string]any `json:"content"`
}

// MaxNote is the longest note a decision may carry.
const MaxNote = 2000

// decideApproval records the caller's decision. One of two approvers deciding at once
// wins; the other is told it was decided (409), with the decision that stands.
func (s *Server) decideApproval(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req DecisionRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	yes := req.Decision == "approve" || req.Decision == "accept"
	if !yes && req.Decision != "deny" && req.Decision != "decline" {
		return errorf(http.StatusUnprocessableEntity, CodeUnprocessable, `decision must be "approve" or "deny" (or, for a question, "accept" with content, or "decline"), not %q`, req.Decision)
	}
	if len(req.Note) > MaxNote {
		return errorf(http.StatusUnprocessableEntity, CodeUnprocessable, "note is %d bytes; at most %d", len(req.Note), MaxNote)
	}
	id := r.PathValue("id")
	var a store.Approval
	var err error
	if req.Content != nil && yes {
		a, err = approvals.Answer(r.Context(), s.cfg.Store, id, c.user.Name, req.Content, s.cfg.Now())
	} else {
		a, err = approvals.Decide(r.Context(), s.cfg.Store, id, c.user.Name, yes, req.Note, s.cfg.Now())
	}
	return answerApproval(w, id, a, err)
}

// BudgetRow is one budget counter and, when the policy still declares the budget, its
// limits.
type BudgetRow struct {
	Budget         string        `json:"budget"`
	Key            string        `json:"key"`
	User           string        `json:"user,omitempty"`
	Window         string        `json:"window,omitempty"`
	WindowStart    *time.Time    `json:"window_start,omitempty"`
	RefillsAt      *time.Time    `json:"refills_at,omitempty"`
	Calls          int64         `json:"calls"`
	ResultBytes    int64         `json:"result_bytes"`
	Tokens         int64         `json:"tokens"`
	SandboxSeconds int64         `json:"sandbox_seconds"`
	Limits         *BudgetLimits `json:"limits,omitempty"`
}

type BudgetLimits struct {
	Calls          int64 `json:"calls,omitempty"`
	ResultBytes    int64 `json:"result_bytes,omitempty"`
	Tokens         int64 `json:"tokens,omitempty"`
	SandboxSeconds int64 `json:"sandbox_seconds,omitempty"`
}

// BudgetsOf lists counters as the API and the CLI show them, with the limits of the
// budgets the policy declares (a counter of a budget since removed has none).
func BudgetsOf(list []store.BudgetUsage, declared []policy.Budget) []BudgetRow {
	byName := map[string]policy.Budget{}
	for _, b := range declared {
		byName[b.Name] = b
	}
	out := make([]BudgetRow, 0, len(list))
	for _, u := range list {
		j := BudgetRow{Budget: u.Budget, Key: u.Key, User: u.User, Calls: u.Calls, ResultBytes: u.Bytes, Tokens: u.Tokens, SandboxSeconds: u.SandboxMS / 1000}
		if !u.WindowStart.IsZero() {
			t := u.WindowStart.UTC()
			j.WindowStart = &t
		}
		if !u.WindowEnd.IsZero() {
			t := u.WindowEnd.UTC()
			j.RefillsAt = &t
		}
		if b, ok := byName[u.Budget]; ok {
			j.Window = b.Window.String()
			j.Limits = &BudgetLimits{Calls: b.Calls, ResultBytes: b.ResultBytes, Tokens: b.Tokens, SandboxSeconds: b.SandboxSeconds}
		}
		out = append(out, j)
	}
	return out
}

// listBudgets lists the budget counters charged to the caller (counters kept per user);
// an admin's lists every counter (?user= narrows it).
func (s *Server) listBudgets(w http.ResponseWriter, r *http.Request, c *caller) error {
	f := store.BudgetFilter{User: c.user.Name}
	if c.user.Admin {
		f.User = r.URL.Query().Get("user")
	}
	list, err := s.cfg.Store.ListBudgetUsage(r.Context(), f)
	if err != nil {
		return err
	}
	var declared []policy.Budget
	if s.cfg.Budgets != nil {
		declared = s.cfg.Budgets()
	}
	writeJSON(w, http.StatusOK, map[string]any{"budgets": BudgetsOf(list, declared)})
	return nil
}
