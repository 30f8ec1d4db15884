package lifecycle

import (
	"context"
	"io"
	"io/fs"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/telemetry"
)

// Sandbox operations made for a turn are spans of its trace (telemetry.Start: none when
// tracing is off or no turn is running): "sandbox acquire" for each call that needs the
// sandbox, with "sandbox create" or "sandbox start" under it when the call made or resumed
// one, and, through the lease's runtime, "sandbox exec" and the file transfers
// ("sandbox write_file", "sandbox read_file", "sandbox list_files"). Each names the
// backend (the provider's type), the provider, the environment and the sandbox; never a
// command, path or content.

// sandboxAttrs are the attributes every sandbox span carries.
func sandboxAttrs(backend, provider, environment, id string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("trueforge.sandbox.backend", backend),
		attribute.String("trueforge.sandbox.provider", provider),
		attribute.String("trueforge.sandbox.environment", environment),
		attribute.String("trueforge.sandbox.id", id),
	}
}

// startOp starts the span of sandbox operation op.
func startOp(ctx context.Context, op string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !telemetry.Recording(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx, span := telemetry.Start(ctx, "sandbox "+op)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("trueforge.sandbox.operation", op))
		span.SetAttributes(attrs...)
	}
	return ctx, span
}

// endOp ends an operation's span, failed when err is set.
func endOp(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		telemetry.Fail(span, "sandbox_error")
	}
	span.End()
}

// endAcquire ends the acquire span with what the call was handed, and, when it records,
// gives the lease a runtime whose operations are spans too.
func endAcquire(span trace.Span, l *Lease, err error) {
	if !span.IsRecording() {
		return
	}
	if l != nil {
		r := l.Record
		attrs := sandboxAttrs(r.ProviderType, r.Provider, r.Environment, r.SandboxID)
		span.SetAttributes(attrs...)
		span.SetAttributes(attribute.String("trueforge.sandbox.transition", string(l.via)),
			attribute.Bool("trueforge.sandbox.provisioned", l.Provisioned))
		l.Runtime = tracedRuntime{Runtime: l.Runtime, attrs: attrs}
	}
	endOp(span, err)
}

// tracedRuntime is a lease's runtime with a span for each operation a tool makes. It is
// only ever a Lease's: the manager's own type checks (sandbox.Placed, LimitReporter…)
// see the backend's runtime.
type tracedRuntime struct {
	sandbox.Runtime
	attrs []attribute.KeyValue
}

func (t tracedRuntime) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	ctx, span := startOp(ctx, "exec", t.attrs...)
	res, err := t.Runtime.Exec(ctx, id, req)
	if span.IsRecording() && err == nil {
		span.SetAttributes(attribute.Int("process.exit.code", res.ExitCode), attribute.Bool("trueforge.sandbox.timed_out", res.TimedOut))
	}
	endOp(span, err)
	return res, err
}

func (t tracedRuntime) WriteFile(ctx context.Context, id, path string, r io.Reader, mode fs.FileMode) error {
	ctx, span := startOp(ctx, "write_file", t.attrs...)
	err := t.Runtime.WriteFile(ctx, id, path, r, mode)
	endOp(span, err)
	return err
}

func (t tracedRuntime) ReadFile(ctx context.Context, id, path string, maxBytes int64) ([]byte, error) {
	ctx, span := startOp(ctx, "read_file", t.attrs...)
	b, err := t.Runtime.ReadFile(ctx, id, path, maxBytes)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("trueforge.sandbox.bytes", len(b)))
	}
	endOp(span, err)
	return b, err
}

func (t tracedRuntime) ListFiles(ctx context.Context, id, dir string, limit int) (sandbox.FileList, error) {
	ctx, span := startOp(ctx, "list_files", t.attrs...)
	l, err := t.Runtime.ListFiles(ctx, id, dir, limit)
	endOp(span, err)
	return l, err
}

// idleOps names the span of the reaper's step to each state.
var idleOps = map[string]string{
	store.SandboxStateStopped:  "stop",
	store.SandboxStateArchived: "archive",
	store.SandboxStateDeleted:  "delete",
}

// traceIdle runs op, the reaper's step of rec's sandbox to state to, as the root span of
// a trace of its own ("sandbox stop", "sandbox archive", "sandbox delete"): it happens
// outside any turn, so it has no turn to belong to; the session's id
// (gen_ai.conversation.id) links it to the session's turns.
func (m *Manager) traceIdle(ctx context.Context, to string, rec store.SessionSandbox, op func() error) error {
	if !m.cfg.Telemetry.Enabled() {
		return op()
	}
	name := idleOps[to]
	if name == "" {
		name = to
	}
	_, span := m.cfg.Telemetry.Tracer().Start(ctx, "sandbox "+name, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal))
	span.SetAttributes(sandboxAttrs(rec.ProviderType, rec.Provider, rec.Environment, rec.SandboxID)...)
	span.SetAttributes(attribute.String("trueforge.sandbox.operation", name),
		attribute.String("gen_ai.conversation.id", rec.SessionID),
		attribute.String("trueforge.sandbox.reason", "idle"))
	err := op()
	endOp(span, err)
	return err
}
