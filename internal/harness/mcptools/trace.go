package mcptools

import (
	"context"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/trueforge/terraform-provider-trueforge/internal/telemetry"
)

// An MCP call is traced in two spans under the tool call that makes it (a model's call
// or a Code Mode script's): "mcp authorize <name>", the gate (the policy rule that
// matched, and a child "mcp approval_wait <name>" while a person decides), and, when the
// gate let it through, "tools/call <name>", the call itself, whose W3C trace context is
// sent to the server (traced below) so its own spans join the turn's trace. The
// arguments and the result are never attributes.

// startAuthorize starts the gate's span of the call of name on r.
func startAuthorize(ctx context.Context, name string, r route) (context.Context, trace.Span) {
	if !telemetry.Recording(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx, span := telemetry.Start(ctx, "mcp authorize "+name)
	if span.IsRecording() {
		span.SetAttributes(mcpAttrs(name, r)...)
	}
	return ctx, span
}

// endAuthorize ends the gate's span with its outcome and the rule that decided.
func endAuthorize(span trace.Span, v Value, err error) {
	if !span.IsRecording() {
		return
	}
	defer span.End()
	setRule(span, v)
	outcome := "allowed"
	switch {
	case errors.Is(err, ErrUnknownTool):
		outcome = "unknown_tool"
	case errors.Is(err, ErrDenied):
		outcome = "denied"
	case errors.Is(err, ErrOverBudget):
		outcome = "over_budget"
	case err != nil:
		outcome = "error"
	}
	span.SetAttributes(attribute.String("trueforge.mcp.outcome", outcome))
	if err != nil {
		telemetry.Fail(span, outcome)
	}
}

// startCall starts the span of the permitted call p.
func (p *Permit) startCall(ctx context.Context) (context.Context, trace.Span) {
	if !telemetry.Recording(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx, span := telemetry.Start(ctx, "tools/call "+p.name, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(mcpAttrs(p.name, p.r)...)
		span.SetAttributes(attribute.String("mcp.method.name", "tools/call"),
			attribute.String("gen_ai.operation.name", "execute_tool"))
		setRule(span, p.value)
	}
	return ctx, span
}

// endCall ends a call's span with its outcome: ok, tool_error (the server's error
// result) or error (it failed on the way).
func endCall(span trace.Span, v Value, err error) {
	if !span.IsRecording() {
		return
	}
	defer span.End()
	outcome := "ok"
	switch {
	case err != nil:
		outcome = "error"
	case v.IsError:
		outcome = "tool_error"
	}
	span.SetAttributes(attribute.String("trueforge.mcp.outcome", outcome))
	if outcome != "ok" {
		telemetry.Fail(span, outcome)
	}
}

// startApproval starts the span of the wait for a person's decision under rule.
func startApproval(ctx context.Context, name string, rule int) (context.Context, trace.Span) {
	if !telemetry.Recording(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx, span := telemetry.Start(ctx, "mcp approval_wait "+name)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("trueforge.mcp.policy_rule", rule))
	}
	return ctx, span
}

// endApproval ends the wait's span with the verdict's state (approved, denied, expired,
// cancelled); never the note, which a person wrote.
func endApproval(span trace.Span, v Verdict, err error) {
	if !span.IsRecording() {
		return
	}
	defer span.End()
	state := v.State
	if err != nil {
		state = "error"
	}
	span.SetAttributes(attribute.String("trueforge.mcp.approval", state))
}

func mcpAttrs(name string, r route) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("gen_ai.tool.name", name),
		attribute.String("trueforge.mcp.server", r.server),
		attribute.String("trueforge.mcp.tool", r.tool),
	}
}

func setRule(span trace.Span, v Value) {
	if v.Rule != nil {
		span.SetAttributes(attribute.Int("trueforge.mcp.policy_rule", *v.Rule))
	}
	if v.Approval != nil {
		span.SetAttributes(attribute.String("trueforge.mcp.approval", v.Approval.State))
	}
}

// traced sends the W3C trace context of each request's context (the tools/call span)
// to the MCP server: traceparent and tracestate, nothing else.
type traced struct{ base http.RoundTripper }

func (t traced) RoundTrip(req *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(req.Context()).IsValid() {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	telemetry.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	return t.base.RoundTrip(req)
}
