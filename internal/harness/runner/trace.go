package runner

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/telemetry"
)

// A turn is one trace: its root span (invoke_agent), a span per model step (chat) and
// per tool call (execute_tool), under which the tools, MCP calls and sandbox operations
// start theirs (telemetry.Start). Attributes follow the OpenTelemetry GenAI semantic
// conventions; no prompt, model output, tool argument or result is one unless the
// operator turned content capture on (telemetry.EnvCaptureContent).

// startTurn starts the turn's root span, a new trace whatever ctx carries, and records
// its trace id on the user message that opens the turn, so the session's log links each
// turn to its trace.
func (x *run) startTurn(ctx context.Context, msg *events.UserMessage) context.Context {
	tel := x.r.Telemetry
	a := x.r.Agent
	msg.TraceID = "" // the runner's to set, whatever the caller sent
	if !tel.Enabled() {
		return ctx
	}
	ctx, x.root = tel.Tracer().Start(ctx, "invoke_agent "+a.Name, trace.WithNewRoot(), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.agent.name", a.Name),
		attribute.String("gen_ai.conversation.id", x.sessionID),
		attribute.String("trueforge.run.id", x.runID),
		attribute.String("trueforge.agent.owner", a.Owner),
		attribute.String("enduser.id", x.user),
	))
	if x.root.SpanContext().IsSampled() { // a turn the sampler dropped has no trace to link to
		msg.TraceID = x.root.SpanContext().TraceID().String()
	}
	if tel.CaptureContent() {
		x.root.SetAttributes(attribute.String("gen_ai.input.messages", messagesJSON("user", msg.ModelText())))
	}
	return ctx
}

// endTurn ends the root span with how the turn ended.
func (x *run) endTurn(status string, out Outcome) {
	if x.root == nil {
		return
	}
	x.root.SetAttributes(attribute.String("trueforge.run.status", status),
		attribute.Int("trueforge.run.steps", out.Steps),
		attribute.Int64("gen_ai.usage.input_tokens", out.InputTokens),
		attribute.Int64("gen_ai.usage.output_tokens", out.OutputTokens))
	if status != store.RunCompleted {
		telemetry.Fail(x.root, "run_"+status)
	}
	x.root.End()
}

// startStep starts a model step's span.
func (x *run) startStep(ctx context.Context, step int) (context.Context, trace.Span) {
	if !telemetry.Recording(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx, span := telemetry.Start(ctx, "chat "+x.r.Model.Name(), trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.request.model", x.r.Model.Name()),
			attribute.Int("trueforge.step", step))
	}
	return ctx, span
}

// endStep ends a model step's span with what the model said about it.
func (x *run) endStep(span trace.Span, resp model.Response, err error) {
	if !span.IsRecording() {
		return
	}
	defer span.End()
	if err != nil {
		telemetry.Fail(span, "model_error")
		return
	}
	span.SetAttributes(attribute.String("gen_ai.response.model", resp.Model),
		attribute.Int64("gen_ai.usage.input_tokens", resp.Usage.InputTokens),
		attribute.Int64("gen_ai.usage.output_tokens", resp.Usage.OutputTokens),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{resp.StopReason}),
		attribute.Int("trueforge.tool_calls", len(resp.ToolCalls)))
	if x.r.Telemetry.CaptureContent() {
		span.SetAttributes(attribute.String("gen_ai.output.messages", messagesJSON("assistant", resp.Text)))
	}
}

// startTool starts a tool call's span; the egress decisions its sandbox's proxy makes
// meanwhile become events of it (onEvent).
func (x *run) startTool(ctx context.Context, tc model.ToolCall) (context.Context, trace.Span) {
	if !telemetry.Recording(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx, span := telemetry.Start(ctx, "execute_tool "+tc.Name)
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", tc.Name),
		attribute.String("gen_ai.tool.call.id", tc.ID),
		attribute.String("gen_ai.tool.type", "function"))
	if x.r.Telemetry.CaptureContent() {
		span.SetAttributes(attribute.String("gen_ai.tool.call.arguments", string(tc.Arguments)))
	}
	x.seqMu.Lock()
	x.tool = span
	x.seqMu.Unlock()
	return ctx, span
}

// endTool ends a tool call's span, once its result is committed (and with it the egress
// decisions the sandbox manager appended meanwhile).
func (x *run) endTool(span trace.Span, res tools.Result) {
	if !span.IsRecording() {
		return
	}
	x.seqMu.Lock()
	x.tool = nil
	x.seqMu.Unlock()
	span.SetAttributes(attribute.Bool("trueforge.tool.provisioned", res.Provisioned),
		attribute.Int("trueforge.tool.result_bytes", res.FullSize))
	if x.r.Telemetry.CaptureContent() {
		span.SetAttributes(attribute.String("gen_ai.tool.call.result", res.Text))
	}
	if res.IsError {
		telemetry.Fail(span, "tool_error")
	}
	span.End()
}

// onEvent adds an event others appended to the session's log to the turn's trace: an
// egress decision becomes an event of the running tool call's span (of the root span
// between calls). Host, port, method and the decision only: a path or query may carry a
// token. Called with seqMu held.
func (x *run) onEvent(kind string, payload json.RawMessage) {
	if x.root == nil || kind != events.KindEgress {
		return
	}
	d, ok := events.As[events.Egress](kind, payload)
	if !ok {
		return
	}
	span := x.tool
	if span == nil {
		span = x.root
	}
	span.AddEvent("egress", trace.WithTimestamp(d.Time), trace.WithAttributes(
		attribute.Bool("trueforge.egress.allowed", d.Allowed),
		attribute.String("trueforge.egress.reason", d.Reason),
		attribute.String("trueforge.egress.mode", d.Mode),
		attribute.String("server.address", d.Host),
		attribute.String("server.port", d.Port),
		attribute.String("http.request.method", d.Method),
		attribute.String("trueforge.sandbox.id", d.Sandbox)))
}

// messagesJSON is one message in the GenAI conventions' message format, for content
// capture.
func messagesJSON(role, text string) string {
	type part struct {
		Type    string `json:"type"`
		Content string `json:"content"`
	}
	type message struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}
	b, _ := json.Marshal([]message{{Role: role, Parts: []part{{Type: "text", Content: text}}}})
	return string(b)
}
