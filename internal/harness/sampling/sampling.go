// Package sampling answers MCP servers' sampling requests (sampling/createMessage):
// a server asks the harness, its client, to run a prompt on the agent's model. That is
// the agent's model at the agent's cost with a prompt the server wrote, so a request is
// refused unless the operator's policy names the server in "sampling", and then runs
// as a model step of its own: no tools, at most MaxTokens out, charged to the agent's
// token budgets (and refused once one is spent).
package sampling

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
)

// MaxTokens caps what one sampling request may generate, whatever the server asks.
const MaxTokens = 4096

// ErrRefused wraps a sampling request the harness does not run.
var ErrRefused = errors.New("sampling refused")

// Policy says which servers may sample (policy.Policy).
type Policy interface {
	AllowsSampling(serverURL string) bool
}

// Budgets is the agent's token budgets (budgets.Meter).
type Budgets interface {
	AdmitTokens(ctx context.Context, s policy.Subject) error
	SpendTokens(ctx context.Context, s policy.Subject, tokens int64)
}

// Sampler runs the sampling requests of one agent's servers for one user
// (mcptools.Sampler).
type Sampler struct {
	Policy  Policy // nil refuses every request
	Model   model.Model
	Budgets Budgets // nil charges none
	// Who the tokens are charged to.
	User, Owner, Agent string
}

// Sample decides and runs p for the call of o on the server at serverURL.
func (s *Sampler) Sample(ctx context.Context, o mcptools.Origin, serverURL string, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	if s.Policy == nil || !s.Policy.AllowsSampling(serverURL) {
		return nil, fmt.Errorf("%w: the operator's MCP policy does not let %s use the agent's model (its \"sampling\" list names the servers that may)", ErrRefused, serverURL)
	}
	subj := policy.Subject{User: s.User, Owner: s.Owner, Agent: s.Agent, Session: o.SessionID, Turn: o.RunID}
	if s.Budgets != nil {
		if err := s.Budgets.AdmitTokens(ctx, subj); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrRefused, err)
		}
	}
	req := model.Request{System: p.SystemPrompt, MaxTokens: min(max(p.MaxTokens, 1), MaxTokens)}
	for _, m := range p.Messages {
		text, err := textOf(m)
		if err != nil {
			return nil, err
		}
		role := model.RoleUser
		if m.Role == "assistant" {
			role = model.RoleAssistant
		}
		req.Messages = append(req.Messages, model.Message{Role: role, Text: text})
	}
	if len(req.Messages) == 0 {
		return nil, fmt.Errorf("%w: the request has no messages", ErrRefused)
	}
	resp, err := s.Model.Generate(ctx, req, nil)
	if s.Budgets != nil {
		s.Budgets.SpendTokens(ctx, subj, resp.Usage.InputTokens+resp.Usage.OutputTokens)
	}
	if err != nil {
		return nil, fmt.Errorf("sampling on the agent's model: %w", err)
	}
	stop := "endTurn"
	if strings.Contains(strings.ToLower(resp.StopReason), "max") || strings.Contains(strings.ToLower(resp.StopReason), "length") {
		stop = "maxTokens"
	}
	return &mcp.CreateMessageResult{Content: &mcp.TextContent{Text: resp.Text}, Model: resp.Model, Role: "assistant", StopReason: stop}, nil
}

// textOf is a sampling message's text: the harness's models take text only.
func textOf(m *mcp.SamplingMessage) (string, error) {
	if t, ok := m.Content.(*mcp.TextContent); ok {
		return t.Text, nil
	}
	return "", fmt.Errorf("%w: only text messages can be sampled (got %T)", ErrRefused, m.Content)
}
