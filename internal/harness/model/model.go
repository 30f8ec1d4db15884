// Package model is the harness's view of a language model: a provider-neutral
// conversation (messages, tool calls, tool results), one Generate call per model step
// with streamed text, and usage. Implementations live in subpackages: openaicompat (any
// OpenAI-compatible Chat Completions API), anthropic (Messages API) and scripted (a
// replay of a file, for demos and tests).
//
// Credentials: a Model resolves its API key from the environment variable the agent
// names at each call, so a rotated key is picked up without a restart and the value is
// never stored with the agent or the session.
package model

import (
	"context"
	"encoding/json"
	"errors"
)

// Roles of a Message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool" // the result of one tool call
)

// Message is one entry of the conversation sent to a model.
type Message struct {
	Role string `json:"role"`
	Text string `json:"text,omitempty"`
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and IsError belong to a tool result.
	ToolCallID string `json:"tool_call_id,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
}

// ToolCall is a call the model asked for; Arguments is a JSON object.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolSpec describes a tool offered to the model; Parameters is a JSON Schema object.
type ToolSpec struct {
	Name        string
	Description string
	Parameters  map[string]any
}

// Request is one model step.
type Request struct {
	System    string
	Messages  []Message
	Tools     []ToolSpec
	MaxTokens int64 // 0: the implementation's default
}

// Usage is what a step cost, in tokens.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
}

// Response is a finished model step.
type Response struct {
	Text       string
	ToolCalls  []ToolCall
	Usage      Usage
	StopReason string
	Model      string
}

// Model generates one step. onText, when set, receives text as it streams; it must not
// block for long.
type Model interface {
	Name() string
	Generate(ctx context.Context, req Request, onText func(string)) (Response, error)
}

// ErrNoKey is returned when the environment variable an agent names for its key is
// unset or empty in the harness's environment.
var ErrNoKey = errors.New("model API key variable is not set")
