// Package scripted is a model.Model that replays a script of model outputs instead of
// calling a model API: for demos and tests, with no key and no network. Everything it
// produces is a replay, and the harness labels it so wherever it shows.
//
// Script format (JSON, the agent's model.script):
//
//	{
//	  "replay": "what this script demonstrates (optional)",
//	  "turns": [
//	    {"text": "Four."},
//	    {"text": "Running it.", "tool_calls": [{"name": "exec", "arguments": {"command": "python3 -V"}}]},
//	    {"text": "Done.", "usage": {"input_tokens": 120, "output_tokens": 8}, "delay_ms": 0}
//	  ]
//	}
//
// Step n of a session (n = the number of assistant messages already in the
// conversation) replays turns[n], so the replay is stateless: a resumed session, or many
// sessions sharing one Model, each get the next turn of their own conversation. A turn
// with tool_calls makes the runner run them and call the model again; a turn without
// ends the user's turn. Past the last turn the model answers with a fixed note and no
// tool calls. Tool call ids are "replay-<turn>-<index>". Usage, when a turn gives none,
// is estimated at 4 characters per token. delay_ms makes a step take that long
// (cancellable), to stand in for model latency.
package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
)

// Script is a parsed replay file.
type Script struct {
	Replay string `json:"replay,omitempty"`
	Turns  []Turn `json:"turns"`
}

// Turn is one model step of a script.
type Turn struct {
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Usage     *Usage     `json:"usage,omitempty"`
	DelayMS   int64      `json:"delay_ms,omitempty"`
}

// ToolCall is a scripted call.
type ToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Usage is a scripted step's token count.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// EndNote is the answer past the last turn.
const EndNote = "(replay ended: the script has no more turns)"

// Parse reads a script, naming what is wrong and how to fix it.
func Parse(data []byte) (*Script, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, errors.New("scripted model: model.script is empty; give the replay file's JSON, for example file(\"replay.json\")")
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("scripted model: model.script is not a valid replay (want {\"turns\": [{\"text\": ..., \"tool_calls\": [...]}]}): %w", err)
	}
	for i, t := range s.Turns {
		for j, tc := range t.ToolCalls {
			if tc.Name == "" {
				return nil, fmt.Errorf("scripted model: turns[%d].tool_calls[%d].name is empty; name a tool such as exec", i, j)
			}
			if len(tc.Arguments) > 0 && !json.Valid(tc.Arguments) {
				return nil, fmt.Errorf("scripted model: turns[%d].tool_calls[%d].arguments is not JSON", i, j)
			}
		}
	}
	return &s, nil
}

// Model replays a Script.
type Model struct{ s *Script }

// New returns a Model replaying s.
func New(s *Script) *Model { return &Model{s: s} }

// Name labels the model as a replay.
func (m *Model) Name() string { return fmt.Sprintf("scripted replay (%d turns)", len(m.s.Turns)) }

// Generate replays the turn for the conversation's step.
func (m *Model) Generate(ctx context.Context, req model.Request, onText func(string)) (model.Response, error) {
	step := 0
	inChars := len(req.System)
	for _, msg := range req.Messages {
		if msg.Role == model.RoleAssistant {
			step++
		}
		inChars += len(msg.Text)
	}
	resp := model.Response{Model: m.Name(), StopReason: "end_turn"}
	if step >= len(m.s.Turns) {
		resp.Text = EndNote
		if onText != nil {
			onText(resp.Text)
		}
		resp.Usage = model.Usage{InputTokens: int64(inChars/4 + 1), OutputTokens: int64(len(resp.Text)/4 + 1)}
		return resp, nil
	}
	t := m.s.Turns[step]
	if t.DelayMS > 0 {
		select {
		case <-ctx.Done():
			return resp, ctx.Err()
		case <-time.After(time.Duration(t.DelayMS) * time.Millisecond):
		}
	}
	if err := ctx.Err(); err != nil {
		return resp, err
	}
	resp.Text = t.Text
	if onText != nil && t.Text != "" {
		onText(t.Text)
	}
	for i, tc := range t.ToolCalls {
		args := tc.Arguments
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		resp.ToolCalls = append(resp.ToolCalls, model.ToolCall{ID: fmt.Sprintf("replay-%d-%d", step, i), Name: tc.Name, Arguments: args})
	}
	if len(resp.ToolCalls) > 0 {
		resp.StopReason = "tool_use"
	}
	if t.Usage != nil {
		resp.Usage = model.Usage{InputTokens: t.Usage.InputTokens, OutputTokens: t.Usage.OutputTokens}
	} else {
		resp.Usage = model.Usage{InputTokens: int64(inChars/4 + 1), OutputTokens: int64(len(t.Text)/4 + 1)}
	}
	return resp, nil
}
