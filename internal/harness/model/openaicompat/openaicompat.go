// Package openaicompat is a model.Model over any OpenAI-compatible Chat Completions API
// (OpenAI, vLLM, Ollama, LiteLLM and the like) through github.com/openai/openai-go/v3.
// Chat Completions rather than Responses because it is what compatible servers share.
//
// Defaults: the key variable is OPENAI_API_KEY when the agent names none, the base URL
// is the SDK's public endpoint when the agent gives none, 2 retries, a 10 minute request
// timeout, streaming with usage (stream_options.include_usage).
package openaicompat

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
)

// DefaultKeyEnv is read when the agent names no key variable.
const DefaultKeyEnv = "OPENAI_API_KEY"

// Model is an OpenAI-compatible chat model.
type Model struct{ cfg model.Endpoint }

// New returns a Model; the key is read at each call, not here.
func New(e model.Endpoint) (*Model, error) {
	cfg, err := e.Complete("openai", "gpt-4.1", DefaultKeyEnv)
	if err != nil {
		return nil, err
	}
	return &Model{cfg: cfg}, nil
}

// Name is the served model's name.
func (m *Model) Name() string { return "openai:" + m.cfg.Model }

func (m *Model) client() (openai.Client, error) {
	key, err := m.cfg.Key()
	if err != nil {
		return openai.Client{}, err
	}
	// Explicit options are applied after the SDK's OPENAI_* environment defaults, so
	// they win: the agent's variable, never OPENAI_API_KEY by accident.
	opts := []option.RequestOption{option.WithAPIKey(key), option.WithMaxRetries(2), option.WithRequestTimeout(10 * time.Minute)}
	if m.cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(m.cfg.BaseURL))
	}
	if m.cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(m.cfg.HTTPClient))
	}
	return openai.NewClient(opts...), nil
}

// Generate runs one streamed chat completion.
func (m *Model) Generate(ctx context.Context, req model.Request, onText func(string)) (model.Response, error) {
	var resp model.Response
	c, err := m.client()
	if err != nil {
		return resp, err
	}
	params := openai.ChatCompletionNewParams{
		Model:         m.cfg.Model,
		Messages:      messages(req),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if req.MaxTokens > 0 {
		params.MaxCompletionTokens = openai.Int(req.MaxTokens)
	}
	for _, t := range req.Tools {
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: shared.FunctionParameters(t.Parameters),
		}))
	}
	stream := c.Chat.Completions.NewStreaming(ctx, params)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		if onText != nil && len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			onText(chunk.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		return resp, fmt.Errorf("openai model %s: %w", m.cfg.Model, err)
	}
	resp.Model = acc.Model
	resp.Usage = model.Usage{
		InputTokens: acc.Usage.PromptTokens, OutputTokens: acc.Usage.CompletionTokens,
		CacheReadTokens: acc.Usage.PromptTokensDetails.CachedTokens,
	}
	if len(acc.Choices) == 0 {
		return resp, fmt.Errorf("openai model %s: the response had no choices", m.cfg.Model)
	}
	ch := acc.Choices[0]
	resp.Text, resp.StopReason = ch.Message.Content, ch.FinishReason
	for _, tc := range ch.Message.ToolCalls {
		args := json.RawMessage(tc.Function.Arguments)
		if !json.Valid(args) {
			args = json.RawMessage("{}")
		}
		resp.ToolCalls = append(resp.ToolCalls, model.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
	}
	return resp, nil
}

func messages(req model.Request) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	if req.System != "" {
		out = append(out, openai.SystemMessage(req.System))
	}
	for _, msg := range req.Messages {
		switch msg.Role {
		case model.RoleUser:
			out = append(out, openai.UserMessage(msg.Text))
		case model.RoleTool:
			out = append(out, openai.ToolMessage(msg.Text, msg.ToolCallID))
		case model.RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if msg.Text != "" {
				a.Content.OfString = openai.String(msg.Text)
			}
			for _, tc := range msg.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: string(tc.Arguments)},
					},
				})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		}
	}
	return out
}
