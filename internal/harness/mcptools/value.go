package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	// Approval is how the approval the rule asked for ended; nil when none was asked.
	Approval *Verdict
}

// ErrDenied wraps a refusal by the harness (the policy); nothing was sent.
var ErrDenied = errors.New("refused by the harness's MCP policy")

// ErrUnknownTool is a name that is not one of the agent's allowed tools.
var ErrUnknownTool = errors.New("not one of the agent's MCP tools")

// CallValue runs an allowed tool for the model (Call) or a script, through the gate
// (Authorize) and then to the server (Permit.Call). An error means no answer: the
// policy refused it or a person did not approve it (ErrDenied, nothing sent; the Value
// carries the rule, the approval and the refusal), a budget refused it (ErrOverBudget),
// the name is unknown (ErrUnknownTool), or the call failed on the way (the server could
// not be reached, ctx ended, the protocol broke); a tool that answered with an error
// result is a Value with IsError. The result's size is charged to the budgets as the
// model receives it.
func (t *Toolset) CallValue(ctx context.Context, o Origin, name string, args map[string]any) (Value, error) {
	p, v, err := t.Authorize(ctx, o, name, args)
	if err != nil {
		return v, err
	}
	v, err = p.Call(ctx)
	if err == nil {
		p.Spent(ctx, int64(len(v.Text)))
	}
	return v, err
}

// forget drops the session of a server whose connection closed, so the next listing
// connects again.
func (t *Toolset) forget(server string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.sessions, server)
	t.listed, t.specs, t.descs, t.routes = false, nil, nil, map[string]route{}
}

// fill puts a tool's answer into v: its text, whether it is an error result, and its
// structured content when it has one.
func fill(v *Value, res *mcp.CallToolResult) {
	v.IsError, v.Text = res.IsError, contentText(res)
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err == nil && json.Unmarshal(raw, &v.Structured) == nil {
			v.HasStructured = true
		}
	}
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
