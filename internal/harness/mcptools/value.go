package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
)

// Descriptor is one allowed tool with its schemas, as Code Mode builds a typed API from
// it.
type Descriptor struct {
	Name        string // "<server>__<tool>"
	Server      string
	Tool        string
	Description string
	Input       map[string]any
	Output      map[string]any // nil when the tool declares no output schema
}

// Descriptors lists the tools of every reachable server, as Specs does.
func (t *Toolset) Descriptors(ctx context.Context) []Descriptor {
	t.Specs(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Descriptor(nil), t.descs...)
}

// Value is a tool's answer as a script receives it: the structured content when the
// tool gave one, else its text.
type Value struct {
	Structured any
	Text       string
	IsError    bool
	// HasStructured: Structured holds the tool's structured content (which may be null).
	HasStructured bool
	// Rule is the policy rule that decided the call (-1: the policy's default); nil when
	// no policy is configured. Set on a refusal too, with Refusal saying why.
	Rule    *int
	Refusal string
}

// ErrDenied wraps a refusal by the harness (the policy); nothing was sent.
var ErrDenied = errors.New("refused by the harness's MCP policy")

// ErrUnknownTool is a name that is not one of the agent's allowed tools.
var ErrUnknownTool = errors.New("not one of the agent's MCP tools")

// decide asks the operator's policy about a call (allowed_tools was applied when the
// tools were listed: a tool it leaves out has no route), recording its verdict in v.
func (t *Toolset) decide(name string, r route, args map[string]any, v *Value) bool {
	if t.opts.Policy == nil {
		return true
	}
	d := t.opts.Policy.Decide(policy.Request{User: t.opts.User, Owner: t.opts.Owner, Agent: t.opts.Agent,
		Server: r.url, Tool: r.tool, Args: args})
	ok, rule, reason := d.Allow, d.Rule, d.Reason
	v.Rule = &rule
	if !ok {
		if reason == "" {
			reason = "no reason given"
		}
		v.Refusal = fmt.Sprintf("MCP tool %s was refused for user %q by the harness's policy (rule %d): %s", name, t.opts.User, rule, reason)
	}
	return ok
}

// CallValue runs an allowed tool, for a script (Code Mode) or the model (Call). An error
// means no answer: the policy refused it (ErrDenied, nothing sent; the Value carries
// the rule and the refusal), the name is unknown (ErrUnknownTool), or the call failed
// on the way (the server could not be reached, ctx ended, the protocol broke); a tool
// that answered with an error result is a Value with IsError.
func (t *Toolset) CallValue(ctx context.Context, name string, args map[string]any) (Value, error) {
	t.mu.Lock()
	r, ok := t.routes[name]
	var cs *mcp.ClientSession
	if ok {
		cs = t.sessions[r.server]
	}
	t.mu.Unlock()
	if !ok || cs == nil {
		return Value{}, fmt.Errorf("%q: %w", name, ErrUnknownTool)
	}
	var v Value
	if !t.decide(name, r, args, &v) {
		return v, fmt.Errorf("%w: %s", ErrDenied, v.Refusal)
	}
	if args == nil {
		args = map[string]any{}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: r.tool, Arguments: args})
	if err != nil {
		if errors.Is(err, mcp.ErrConnectionClosed) {
			t.mu.Lock()
			delete(t.sessions, r.server)
			t.listed, t.specs, t.descs, t.routes = false, nil, nil, map[string]route{}
			t.mu.Unlock()
		}
		return v, fmt.Errorf("MCP server %s: %w", r.server, err)
	}
	v.IsError, v.Text = res.IsError, contentText(res)
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err == nil && json.Unmarshal(raw, &v.Structured) == nil {
			v.HasStructured = true
		}
	}
	return v, nil
}

// contentText joins a result's text blocks (other blocks as their JSON).
func contentText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			b.WriteString(c.Text)
		default:
			raw, _ := json.Marshal(c)
			b.Write(raw)
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// asObject is a schema as a JSON object (nil for none).
func asObject(schema any) map[string]any {
	if schema == nil {
		return nil
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}
