package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Elicitations: an MCP server's question to the session's user (elicitation/create)
// waits like a held call, as an approval of kind elicitation that only the session's
// user may answer: accepted with an answer that fits the server's schema, declined, or
// left until its deadline (then the server is told the user cancelled).

// ElicitTimeout is how long a server's question waits for its answer.
const ElicitTimeout = policy.DefaultApprovalTimeout

// MaxSchema is the largest requested schema (JSON) kept and shown.
const MaxSchema = 64 << 10

// ErrBadAnswer wraps an answer that does not fit the question's schema.
var ErrBadAnswer = errors.New("the answer does not fit the question's schema")

// Elicit puts e to the session's user and waits for the answer (mcptools.Asker).
func (g *Gate) Elicit(ctx context.Context, e mcptools.Elicitation) (mcptools.Answer, error) {
	schema := ""
	if e.Schema != nil {
		raw, err := json.Marshal(e.Schema)
		if err != nil || len(raw) > MaxSchema {
			// A question that cannot be shown cannot be answered: it is declined
			// without asking, which is the server's answer, not a failure.
			return mcptools.Answer{Action: "decline"}, nil //nolint:nilerr // declining is the answer
		}
		schema = string(raw)
	}
	a := store.Approval{
		ID: NewID(), SessionID: e.Origin.SessionID, RunID: e.Origin.RunID, ToolCallID: e.Origin.ToolCallID,
		User: e.User, Agent: e.Agent, Owner: e.Owner, Kind: store.ApprovalKindElicitation, Server: e.Server, Tool: e.Name,
		Rule: -1, Reason: cutText(e.Message), Schema: schema, Approvers: []string{policy.Caller},
		Deadline: g.now().Add(ElicitTimeout),
	}
	decided, err := g.await(ctx, a, e.Origin.Appended)
	if err != nil {
		return mcptools.Answer{}, err
	}
	switch decided.State {
	case store.ApprovalApproved:
		var content map[string]any
		if decided.Response != "" {
			if err := json.Unmarshal([]byte(decided.Response), &content); err != nil {
				return mcptools.Answer{}, fmt.Errorf("the stored answer of %s: %w", a.ID, err)
			}
		}
		return mcptools.Answer{Action: "accept", Content: content}, nil
	case store.ApprovalDenied:
		return mcptools.Answer{Action: "decline"}, nil
	}
	return mcptools.Answer{Action: "cancel"}, nil
}

// cutText is s as an approver is shown it: at most MaxArgumentText bytes, and how many
// more there were.
func cutText(s string) string {
	if len(s) > MaxArgumentText {
		return s[:MaxArgumentText] + fmt.Sprintf("…(%d more bytes)", len(s)-MaxArgumentText)
	}
	return s
}

// Answer accepts elicitation id for user with content, which must fit its schema
// (ErrBadAnswer, naming what does not). ErrNotFound when there is no such question that
// user may answer; store.ErrDecided when it was answered or its deadline passed.
func Answer(ctx context.Context, st *store.Store, id, user string, content map[string]any, now time.Time) (store.Approval, error) {
	a, err := Get(ctx, st, id, user)
	if err != nil {
		return a, err
	}
	if a.Kind != store.ApprovalKindElicitation {
		return a, fmt.Errorf("approval %s holds a call, not a question: approve or deny it: %w", id, ErrBadAnswer)
	}
	if err := fits(a.Schema, content); err != nil {
		return a, err
	}
	raw, err := json.Marshal(content)
	if err != nil {
		return a, fmt.Errorf("%w: %v", ErrBadAnswer, err)
	}
	return st.AnswerApproval(ctx, id, user, string(raw), now)
}

// fits checks content against the requested schema (JSON; "" accepts an empty answer
// only).
func fits(schema string, content map[string]any) error {
	if schema == "" {
		if len(content) > 0 {
			return fmt.Errorf("%w: the server asked for no fields", ErrBadAnswer)
		}
		return nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		return fmt.Errorf("%w: the server's schema cannot be read: %v", ErrBadAnswer, err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return fmt.Errorf("%w: the server's schema cannot be used: %v", ErrBadAnswer, err)
	}
	// Validate reads JSON values: numbers as float64, as the answer arrives from JSON.
	raw, _ := json.Marshal(content)
	var instance any
	_ = json.Unmarshal(raw, &instance)
	if instance == nil {
		instance = map[string]any{}
	}
	if err := rs.Validate(instance); err != nil {
		return fmt.Errorf("%w: %v", ErrBadAnswer, err)
	}
	return nil
}
