package runner_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/codemode"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/jaegertest"
	"github.com/trueforge/terraform-provider-trueforge/internal/telemetry"
)

// A scripted turn with a sandbox exec and a Code Mode MCP call, exported to a real
// Jaeger and read back from its query API: one trace whose root is the turn, with a span
// per model step and per tool call, the sandbox's acquire, create and exec spans and the
// MCP gate and call spans under the tool calls that made them, each with its attributes.
// The trace id the session's log records is Jaeger's; the MCP server received the call's
// traceparent; and nothing Jaeger holds carries the MCP credential, the prompt or a tool
// argument.
func TestTraceOfATurnInJaeger(t *testing.T) {
	tt := tracedTurn(t, false)
	tr, raw, traceID, sid, r, kb := tt.trace, tt.raw, tt.traceID, tt.sid, tt.r, tt.kb
	for _, canary := range []string{canarySecret, canaryPrompt, canaryArg, canaryCode} {
		if strings.Contains(string(raw), canary) {
			t.Fatalf("the canary %q is in what Jaeger stored:\n%s", canary, raw)
		}
	}
	if p := tr.Processes[tr.Spans[0].ProcessID]; p.ServiceName != "trueforge-trace-test" {
		t.Fatalf("service name %q", p.ServiceName)
	}

	byID := map[string]jaegertest.Span{}
	for _, s := range tr.Spans {
		byID[s.SpanID] = s
	}
	named := func(name string) []jaegertest.Span {
		var out []jaegertest.Span
		for _, s := range tr.Spans {
			if s.OperationName == name {
				out = append(out, s)
			}
		}
		return out
	}
	one := func(name string) jaegertest.Span {
		t.Helper()
		ss := named(name)
		if len(ss) != 1 {
			t.Fatalf("%d spans %q; want 1 in %s", len(ss), name, spanNames(tr))
		}
		return ss[0]
	}
	// under says s descends from ancestor.
	under := func(s, ancestor jaegertest.Span) bool {
		for p := s.Parent(); p != ""; p = byID[p].Parent() {
			if p == ancestor.SpanID {
				return true
			}
		}
		return false
	}
	tag := func(s jaegertest.Span, key string) any {
		t.Helper()
		v, ok := s.Tag(key)
		if !ok {
			t.Fatalf("span %q has no attribute %s: %v", s.OperationName, key, s.Tags)
		}
		return v
	}

	root := one("invoke_agent tracer")
	if root.Parent() != "" || tag(root, "gen_ai.conversation.id") != sid || tag(root, "trueforge.run.status") != "completed" {
		t.Fatalf("root span %+v", root)
	}
	steps := named("chat " + r.Model.Name())
	if len(steps) != 3 {
		t.Fatalf("%d model step spans; want 3 in %s", len(steps), spanNames(tr))
	}
	for _, s := range steps {
		if s.Parent() != root.SpanID || tag(s, "gen_ai.operation.name") != "chat" || tag(s, "gen_ai.request.model") != r.Model.Name() {
			t.Fatalf("model step span %+v", s)
		}
		if n, _ := tag(s, "gen_ai.usage.input_tokens").(float64); n <= 0 {
			t.Fatalf("model step input tokens %v", s.Tags)
		}
		tag(s, "gen_ai.usage.output_tokens")
		tag(s, "gen_ai.response.finish_reasons")
	}
	execTool := one("execute_tool exec")
	codeTool := one("execute_tool " + codemode.ToolName)
	for _, s := range []jaegertest.Span{execTool, codeTool} {
		if s.Parent() != root.SpanID || tag(s, "gen_ai.operation.name") != "execute_tool" {
			t.Fatalf("tool span %+v", s)
		}
	}
	create := one("sandbox create")
	if !under(create, execTool) || tag(create, "trueforge.sandbox.backend") != "local" || tag(create, "trueforge.sandbox.environment") != "default" {
		t.Fatalf("sandbox create span %+v", create)
	}
	var execUnderExec, execUnderCode bool
	for _, s := range named("sandbox exec") {
		if tag(s, "trueforge.sandbox.backend") != "local" || tag(s, "trueforge.sandbox.id") == "" {
			t.Fatalf("sandbox exec span %+v", s)
		}
		execUnderExec = execUnderExec || under(s, execTool)
		execUnderCode = execUnderCode || under(s, codeTool)
	}
	if !execUnderExec || !execUnderCode {
		t.Fatalf("sandbox exec spans under the exec tool %v, under run_code %v; want both in %s", execUnderExec, execUnderCode, spanNames(tr))
	}
	authz := one("mcp authorize kb__forecast")
	mcpCall := one("tools/call kb__forecast")
	if !under(authz, codeTool) || !under(mcpCall, codeTool) {
		t.Fatalf("the MCP spans are not under the run_code call in %s", spanNames(tr))
	}
	if tag(authz, "trueforge.mcp.outcome") != "allowed" || tag(mcpCall, "trueforge.mcp.outcome") != "ok" ||
		tag(mcpCall, "trueforge.mcp.server") != "kb" || tag(mcpCall, "trueforge.mcp.tool") != "forecast" ||
		tag(mcpCall, "mcp.method.name") != "tools/call" {
		t.Fatalf("MCP spans %+v\n%+v", authz, mcpCall)
	}
	// The server received the call's trace context: this trace, the call's span.
	tps := kb.seenTraceparents()
	if len(tps) != 1 || tps[0] != "00-"+traceID+"-"+mcpCall.SpanID+"-01" {
		t.Fatalf("the MCP server saw traceparent %q; want the tools/call span %s of trace %s", tps, mcpCall.SpanID, traceID)
	}
}

// With content capture on (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true) the
// prompt and the tool arguments are attributes, so the check above would see them; the
// MCP credential never is.
func TestTraceCapturesContentOnlyWhenAsked(t *testing.T) {
	tt := tracedTurn(t, true)
	for _, canary := range []string{canaryPrompt, canaryArg, canaryCode} {
		if !strings.Contains(string(tt.raw), canary) {
			t.Fatalf("with content capture on, %q is not in what Jaeger stored:\n%s", canary, tt.raw)
		}
	}
	if strings.Contains(string(tt.raw), canarySecret) {
		t.Fatalf("the MCP credential is in what Jaeger stored:\n%s", tt.raw)
	}
}

// The canaries of tracedTurn: the MCP server's credential, a prompt, an exec command and
// a Code Mode script.
const (
	canarySecret = "kb-CANARY-secret-5b7e11"
	canaryPrompt = "PROMPT-CANARY-90d1c3"
	canaryArg    = "ARG-CANARY-4f2a88"
	canaryCode   = "CODE-CANARY-1c6e0b"
)

type traced struct {
	trace   jaegertest.Trace
	raw     []byte
	traceID string
	sid     string
	r       *runner.Runner
	kb      *kbServer
}

// tracedTurn runs a scripted turn (an exec, a Code Mode script calling the kb MCP
// server, an answer) exporting to a throwaway Jaeger, and returns the turn's trace as
// Jaeger's query API gives it.
func tracedTurn(t *testing.T, capture bool) traced {
	t.Helper()
	j := jaegertest.Start(t)
	ctx := context.Background()
	tel, err := telemetry.New(ctx, telemetry.Config{TracesURL: j.OTLP, ServiceName: "trueforge-trace-test", Version: "test", CaptureContent: capture})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	f := newFixture(t)
	kb := newKB(t, canarySecret)
	code := `w = kb.forecast(city="Paris")
print("` + canaryCode + `", w["temp_c"])`
	r, _ := f.codeAgent(t, "tracer", kb, nil, harnesstest.Owner, nil,
		exec("echo "+canaryArg), runCode(codemode.Python, code), text("done"))
	r.Telemetry = tel
	sid, _ := r.NewSession(ctx, harnesstest.Owner)
	mustRun(t, r, sid, "please run it "+canaryPrompt)

	msgs := harnesstest.Payloads(t, f.env.Store, sid, events.KindUserMessage)
	traceID, _ := msgs[0]["trace_id"].(string)
	if len(traceID) != 32 {
		t.Fatalf("user_message %v: want the turn's 32-hex trace_id", msgs[0])
	}
	if err := tel.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tr, raw, err := j.Get(wait, traceID, 12)
	if err != nil {
		t.Fatalf("%v; Jaeger answered:\n%s", err, raw)
	}
	if tr.TraceID != traceID {
		t.Fatalf("Jaeger's trace id %s, the session's log %s", tr.TraceID, traceID)
	}
	return traced{trace: tr, raw: raw, traceID: traceID, sid: sid, r: r, kb: kb}
}

// Without tracing the turn records no trace id and the MCP server receives no
// traceparent: off is off.
func TestNoTraceWhenTracingIsOff(t *testing.T) {
	f := newFixture(t)
	kb := newKB(t, "kb-CANARY-off-77aa")
	r, _ := f.codeAgent(t, "untraced", kb, nil, harnesstest.Owner, nil,
		runCode(codemode.Python, `print(kb.forecast(city="Oslo")["temp_c"])`), text("done"))
	r.Telemetry = telemetry.Off()
	sid, _ := r.NewSession(context.Background(), harnesstest.Owner)
	mustRun(t, r, sid, "hi")
	msgs := harnesstest.Payloads(t, f.env.Store, sid, events.KindUserMessage)
	if _, ok := msgs[0]["trace_id"]; ok {
		t.Fatalf("user_message %v has a trace_id with tracing off", msgs[0])
	}
	if tps := kb.seenTraceparents(); len(tps) != 1 || tps[0] != "" {
		t.Fatalf("the MCP server saw traceparent %q with tracing off", tps)
	}
}

func spanNames(tr jaegertest.Trace) string {
	var names []string
	for _, s := range tr.Spans {
		names = append(names, s.OperationName)
	}
	return strings.Join(names, ", ")
}
