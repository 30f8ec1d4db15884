package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
)

// tool is one entry of the table: what the model is told (name, description, and the
// JSON schema derived from the handler's argument type) and what runs.
type tool struct {
	name        string
	description string
	// offered says whether an agent's model gets the tool (from its spec only).
	offered func(a *agents.Agent) bool
	// describe, when set, makes the description from the agent's spec instead (the
	// skills load_skill lists).
	describe func(a *agents.Agent) string
	// args is the schema derived from the argument type; schema is it as the model
	// APIs take it (parameters).
	args   *jsonschema.Schema
	schema map[string]any
	// run decodes and checks the arguments, then calls the handler.
	run func(ctx context.Context, in invocation, raw json.RawMessage) Result
}

// invocation is what a handler works with besides its arguments.
type invocation struct {
	x *Executor
	c Call
}

// handler runs one typed call. The Result's text is the full text: Run cuts it.
type handler[T any] func(ctx context.Context, in invocation, args T) Result

// define makes a table entry whose schema is derived from T: each field's json name is a
// property, its jsonschema tag the property's description, and a field without
// omitempty is required. Arguments are decoded into a T, and a missing required field
// or a value of the wrong type is answered with an error naming the field, before the
// handler (and so before any sandbox) is reached.
func define[T any](name, description string, offered func(*agents.Agent) bool, h handler[T]) tool {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: %v", name, err)) // a programming error, caught by every test
	}
	t := tool{name: name, description: description, offered: offered, args: s, schema: parameters(s)}
	t.run = func(ctx context.Context, in invocation, raw json.RawMessage) Result {
		var args T
		if err := t.decode(raw, &args); err != nil {
			return failed(err.Error())
		}
		return h(ctx, in, args)
	}
	return t
}

// parameters is s as the model APIs take it: a plain JSON object whose "required" is a
// []string (always present), without "additionalProperties": unknown arguments are
// ignored, as they always were.
func parameters(s *jsonschema.Schema) map[string]any {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	delete(m, "additionalProperties")
	m["required"] = append([]string{}, s.Required...)
	return m
}

func (t *tool) spec() model.ToolSpec {
	return model.ToolSpec{Name: t.name, Description: t.description, Parameters: t.schema}
}

// property returns the type and description of one argument.
func (t *tool) property(name string) (typ, desc string) {
	if p := t.args.Properties[name]; p != nil {
		return p.Type, p.Description
	}
	return "", ""
}

// decode reads the model's arguments into v, refusing what is not an object, a missing
// required argument, and an argument of the wrong type, each with what to send instead.
func (t *tool) decode(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return fmt.Errorf("%s: the arguments must be a JSON object %s, not %s", t.name, t.shape(), clip(string(raw), 80))
	}
	for _, name := range t.args.Required {
		if f, ok := fields[name]; !ok || string(f) == "null" {
			typ, desc := t.property(name)
			return fmt.Errorf("%s: the required argument %q is missing (%s: %s); call %s again with it", t.name, name, typ, desc, t.name)
		}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			typ, desc := t.property(te.Field)
			return fmt.Errorf("%s: argument %q must be %s, not %s (%s); call %s again with it fixed",
				t.name, te.Field, article(typ), article(te.Value), desc, t.name)
		}
		return fmt.Errorf("%s: the arguments do not fit %s: %v", t.name, t.shape(), err)
	}
	return nil
}

// shape sketches the arguments object in field order, for example
// {"command": string (required), "timeout_seconds": integer, "cwd": string}.
func (t *tool) shape() string {
	parts := make([]string, 0, len(t.args.PropertyOrder))
	for _, name := range t.args.PropertyOrder {
		typ, _ := t.property(name)
		if slices.Contains(t.args.Required, name) {
			typ += " (required)"
		}
		parts = append(parts, fmt.Sprintf("%q: %s", name, typ))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// article names a JSON type (or a value json reports, such as "number 1.5") as a phrase.
func article(s string) string {
	switch s {
	case "integer", "array", "object":
		return "an " + s
	case "string", "number", "boolean":
		return "a " + s
	case "bool":
		return "a boolean"
	}
	if v, ok := strings.CutPrefix(s, "number "); ok {
		return v
	}
	return s
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// failed is an error result.
func failed(text string) Result { return Result{Text: text, IsError: true} }
