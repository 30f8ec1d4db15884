// Package anthropic is a model.Model over the Anthropic Messages API through
// github.com/anthropics/anthropic-sdk-go/v2, streamed and folded with Message.Accumulate.
//
// Defaults: the key variable is ANTHROPIC_API_KEY when the agent names none, max_tokens
// is 8192 when the request sets none, 2 retries, a 10 minute request timeout. The SDK's
// own environment defaults (ANTHROPIC_* variables, config-file profiles) are switched
// off, so the only credential used is the one the agent names.
package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
)

// DefaultKeyEnv is read when the agent names no key variable.
const DefaultKeyEnv = "ANTHROPIC_API_KEY"

// DefaultMaxTokens is sent when a request sets no MaxTokens (the API requires one).
const DefaultMaxTokens = 8192

// Model is an Anthropic Messages model.
type Model struct{ cfg model.Endpoint }

// New returns a Model; the key is read at each call, not here.
func New(e model.Endpoint) (*Model, error) {
	cfg, err := e.Complete("anthropic", "claude-sonnet-4-5", DefaultKeyEnv)
	if err != nil {
		return nil, err
	}
	return &Model{cfg: cfg}, nil
}

// Name is the model's name.
func (m *Model) Name() string { return "anthropic:" + m.cfg.Model }

func (m *Model) client() (sdk.Client, error) {
	key, err := m.cfg.Key()
	if err != nil {
		return sdk.Client{}, err
	}
	opts := []option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithAPIKey(key),
		option.WithMaxRetries(2), option.WithRequestTimeout(10 * time.Minute)}
	if m.cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(m.cfg.BaseURL))
	}
	if m.cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(m.cfg.HTTPClient))
	}
	return sdk.NewClient(opts...), nil
}

// Generate runs one streamed Messages call.
func (m *Model) Generate(ctx context.Context, req model.Request, onText func(string)) (model.Response, error) {
	var resp model.Response
	c, err := m.client()
	if err != nil {
		return resp, err
	}
	params := sdk.MessageNewParams{Model: m.cfg.Model, MaxTokens: req.MaxTokens, Messages: messages(req.Messages)}
	if params.MaxTokens <= 0 {
		params.MaxTokens = DefaultMaxTokens
	}
	if req.System != "" {
		params.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		schema := sdk.ToolInputSchemaParam{Properties: t.Parameters["properties"]}
		if r, ok := t.Parameters["required"].([]string); ok {
			schema.Required = r
		}
		tool := sdk.ToolUnionParamOfTool(schema, t.Name)
		tool.OfTool.Description = sdk.String(t.Description)
		params.Tools = append(params.Tools, tool)
	}
	stream := c.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	var msg sdk.Message
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return resp, fmt.Errorf("anthropic model %s: %w", m.cfg.Model, err)
		}
		if onText != nil && ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
			onText(ev.Delta.Text)
		}
	}
	if err := stream.Err(); err != nil {
		return resp, fmt.Errorf("anthropic model %s: %w", m.cfg.Model, err)
	}
	resp.Model, resp.StopReason = msg.Model, string(msg.StopReason)
	resp.Usage = model.Usage{
		InputTokens: msg.Usage.InputTokens, OutputTokens: msg.Usage.OutputTokens,
		CacheReadTokens: msg.Usage.CacheReadInputTokens, CacheWriteTokens: msg.Usage.CacheCreationInputTokens,
	}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			resp.Text += b.Text
		case "tool_use":
			args := b.Input
			if len(args) == 0 || !json.Valid(args) {
				args = json.RawMessage("{}")
			}
			resp.ToolCalls = append(resp.ToolCalls, model.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	return resp, nil
}

// messages converts the conversation; consecutive tool results become one user message,
// as the API requires every result of a step in the message after it.
func messages(in []model.Message) []sdk.MessageParam {
	var out []sdk.MessageParam
	var results []sdk.ContentBlockParamUnion
	flush := func() {
		if len(results) > 0 {
			out = append(out, sdk.NewUserMessage(results...))
			results = nil
		}
	}
	for _, msg := range in {
		switch msg.Role {
		case model.RoleTool:
			results = append(results, sdk.NewToolResultBlock(msg.ToolCallID, msg.Text, msg.IsError))
		case model.RoleUser:
			flush()
			out = append(out, sdk.NewUserMessage(sdk.NewTextBlock(msg.Text)))
		case model.RoleAssistant:
			flush()
			var blocks []sdk.ContentBlockParamUnion
			if msg.Text != "" {
				blocks = append(blocks, sdk.NewTextBlock(msg.Text))
			}
			for _, tc := range msg.ToolCalls {
				var input any = tc.Arguments
				blocks = append(blocks, sdk.NewToolUseBlock(tc.ID, input, tc.Name))
			}
			if len(blocks) == 0 {
				blocks = append(blocks, sdk.NewTextBlock("(no text)"))
			}
			out = append(out, sdk.NewAssistantMessage(blocks...))
		}
	}
	flush()
	return out
}
