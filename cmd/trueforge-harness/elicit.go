package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/approvals"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/termsafe"
)

// An MCP server's question to the user (an approval of kind elicitation): chat asks
// each field of its schema at the prompt; run, where nobody is at a prompt, declines it,
// or with --yes accepts it with the schema's defaults.

// property is one field of a question's schema, as the prompt asks it.
type property struct {
	name, typ, title, description string
	def                           any
	enum                          []string
	required                      bool
}

// fields reads a question's flat schema (elicitations allow only top-level fields),
// required ones first, then by name.
func fields(schema string) []property {
	var s struct {
		Properties map[string]struct {
			Type        string `json:"type"`
			Title       string `json:"title"`
			Description string `json:"description"`
			Default     any    `json:"default"`
			Enum        []string
			Items       struct {
				Enum []string `json:"enum"`
			} `json:"items"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal([]byte(schema), &s)
	var out []property
	for name, p := range s.Properties {
		enum := p.Enum
		if p.Type == "array" {
			enum = p.Items.Enum
		}
		out = append(out, property{name: name, typ: p.Type, title: p.Title, description: p.Description, def: p.Default, enum: enum,
			required: slices.Contains(s.Required, name)})
	}
	slices.SortFunc(out, func(a, b property) int {
		if a.required != b.required {
			if a.required {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

// defaults is the answer made of the schema's defaults.
func defaults(schema string) map[string]any {
	out := map[string]any{}
	for _, p := range fields(schema) {
		if p.def != nil {
			out[p.name] = p.def
		}
	}
	return out
}

// parseValue reads a typed value as the user typed it.
func parseValue(p property, text string) (any, error) {
	switch p.typ {
	case "integer":
		return strconv.ParseInt(text, 10, 64)
	case "number":
		return strconv.ParseFloat(text, 64)
	case "boolean":
		switch strings.ToLower(text) {
		case "y", "yes", "true":
			return true, nil
		case "n", "no", "false":
			return false, nil
		}
		return nil, errors.New("answer y or n")
	case "array":
		var list []any
		for _, v := range strings.Split(text, ",") {
			if v = strings.TrimSpace(v); v != "" {
				list = append(list, v)
			}
		}
		return list, nil
	}
	return text, nil
}

// askQuestion asks the user each field of question a at the terminal and answers it:
// an empty line keeps a field's default (or leaves it out), "-" alone at the first
// field declines. An answer that does not fit the schema is asked once more, then
// declined.
func askQuestion(ctx context.Context, st *store.Store, user string, a store.Approval, out io.Writer, lines <-chan string) bool {
	fmt.Fprintf(out, "\n  [question] MCP server %s (%s) asks: %s\n", termsafe.Line(a.Tool), termsafe.Line(a.Server), termsafe.Line(clip(a.Reason, 400)))
	fmt.Fprintf(out, "             answer each field (empty: the default; \"-\" at the first field: decline)\n")
	for try := 0; try < 2; try++ {
		content := map[string]any{}
		for i, p := range fields(a.Schema) {
			label := p.name
			if p.title != "" {
				label += " — " + p.title
			}
			hint := p.typ
			if len(p.enum) > 0 {
				hint = strings.Join(p.enum, "|")
			}
			if p.def != nil {
				hint += fmt.Sprintf(", default %v", p.def)
			}
			if p.required {
				hint += ", required"
			}
			fmt.Fprintf(out, "  %s (%s): ", termsafe.Line(label), termsafe.Line(hint))
			line, ok := nextLine(ctx, out, lines)
			if !ok {
				return false
			}
			if i == 0 && line == "-" {
				return decline(ctx, st, user, a, out)
			}
			if line == "" {
				if p.def != nil {
					content[p.name] = p.def
				}
				continue
			}
			v, err := parseValue(p, line)
			if err != nil {
				fmt.Fprintf(out, "  %s: %v; left out\n", p.name, err)
				continue
			}
			content[p.name] = v
		}
		_, err := approvals.Answer(ctx, st, a.ID, user, content, time.Now())
		if errors.Is(err, approvals.ErrBadAnswer) {
			fmt.Fprintf(out, "  [question] %v\n", err)
			continue
		}
		return report(out, a.ID, err, store.ApprovalApproved)
	}
	return decline(ctx, st, user, a, out)
}

// decline declines question a.
func decline(ctx context.Context, st *store.Store, user string, a store.Approval, out io.Writer) bool {
	_, err := approvals.Decide(ctx, st, a.ID, user, false, "", time.Now())
	return report(out, a.ID, err, store.ApprovalDenied)
}

// report says how deciding approval id went.
func report(out io.Writer, id string, err error, state string) bool {
	switch {
	case errors.Is(err, store.ErrDecided):
		fmt.Fprintf(out, "  [approval] %s was decided already: %v\n", id, err)
	case err != nil:
		fmt.Fprintf(out, "  [approval] %s: %v\n", id, err)
	default:
		fmt.Fprintf(out, "  [approval] %s %s\n", strings.ToUpper(state), id)
	}
	return true
}

// nextLine is the next line typed, trimmed; false when input ended or ctx did.
func nextLine(ctx context.Context, out io.Writer, lines <-chan string) (string, bool) {
	select {
	case <-ctx.Done():
		fmt.Fprintln(out)
		return "", false
	case l, ok := <-lines:
		if !ok {
			fmt.Fprintln(out)
			return "", false
		}
		return strings.TrimSpace(l), true
	}
}

// answerQuestions is run's answer to its session's questions while the turn runs:
// each is declined, or with yes accepted with its schema's defaults (declined when
// they do not make an answer it accepts).
func answerQuestions(ctx context.Context, st *store.Store, user, session string, yes bool, out io.Writer) {
	eachPending(ctx, st, user, session, func(a store.Approval) bool {
		if a.Kind != store.ApprovalKindElicitation {
			return true
		}
		if yes {
			if _, err := approvals.Answer(ctx, st, a.ID, user, defaults(a.Schema), time.Now()); err == nil {
				fmt.Fprintf(out, "  [question] %s accepted with its defaults (--yes)\n", a.ID)
				return true
			}
		}
		_, _ = approvals.Decide(ctx, st, a.ID, user, false, "run declines questions; answer them in chat, or run --yes to accept their defaults", time.Now())
		fmt.Fprintf(out, "  [question] %s declined (run does not ask; --yes accepts defaults)\n", a.ID)
		return true
	})
}
