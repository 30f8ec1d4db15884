package runner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/jaegertest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/telemetry"
)

// The egress proxy's decisions are events of the tool call whose command made them: the
// allowed request with a secret substituted and the refused one with its reason, by host
// and port only (never the path, never the secret). And a stopped sandbox resumed by the
// next turn's call is a "sandbox start" span under its acquire; the reaper's stop between
// the turns is a trace of its own ("sandbox stop"), tagged with the session.
func TestTraceOfEgressAndResume(t *testing.T) {
	f := newEgressFixture(t)
	j := jaegertest.Start(t)
	ctx := context.Background()
	tel, err := telemetry.New(ctx, telemetry.Config{TracesURL: j.OTLP, ServiceName: "trueforge-trace-test", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	// The reaper traces with it too: a harness started now, as serve would be.
	f.telemetry = tel
	f.newHarness(t, netdHelper(t))
	const pathCanary = "PATH-CANARY-e01b"
	harnesstest.AddAgent(t, f.env.Store, "net", "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			exec(curlAuth(f.up.port)+fmt.Sprintf(`; curl -sS --max-time 20 https://%s:%s/%s`, deniedHost, f.up.port, pathCanary)),
			text("turn 1 done"),
			exec("echo resumed"), text("turn 2 done"),
		),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
	r := f.runner(t, "net")
	r.Telemetry = tel
	sid := ownerSession(t, r)
	mustRun(t, r, sid, "go")
	f.clock.Advance(16 * time.Minute)
	if trs, err := f.manager.Reap(ctx); err != nil || len(trs) != 1 || trs[0].To != store.SandboxStateStopped {
		t.Fatalf("reap: %+v %v; want one stop", trs, err)
	}
	mustRun(t, r, sid, "again")
	msgs := harnesstest.Payloads(t, f.env.Store, sid, events.KindUserMessage)
	if err := tel.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	first, raw, err := j.Get(wait, msgs[0]["trace_id"].(string), 6)
	if err != nil {
		t.Fatalf("%v; Jaeger answered:\n%s", err, raw)
	}
	for _, canary := range []string{secretV1, pathCanary} {
		if strings.Contains(string(raw), canary) {
			t.Fatalf("%q is in what Jaeger stored:\n%s", canary, raw)
		}
	}
	var allowed, refused bool
	for _, s := range first.Spans {
		if s.OperationName != "execute_tool exec" {
			continue
		}
		for _, l := range s.Logs {
			kv := map[string]any{}
			for _, fl := range l.Fields {
				kv[fl.Key] = fl.Value
			}
			if kv["event"] != "egress" {
				continue
			}
			allowed = allowed || (kv["trueforge.egress.allowed"] == true && kv["server.address"] == allowedHost && kv["server.port"] == f.up.port)
			refused = refused || (kv["trueforge.egress.allowed"] == false && kv["server.address"] == deniedHost && kv["trueforge.egress.reason"] == "not_allowed")
		}
	}
	if !allowed || !refused {
		t.Fatalf("egress events on the exec span: allowed %v, refused %v; want both in\n%s", allowed, refused, raw)
	}

	// The reaper's stop, outside any turn, is a trace of its own, named by the session.
	stops, raw, err := j.Find(wait, "trueforge-trace-test", "sandbox stop", map[string]string{"gen_ai.conversation.id": sid})
	if err != nil {
		t.Fatalf("%v; Jaeger answered:\n%s", err, raw)
	}
	stop := stops[0].Spans[0]
	if v, _ := stop.Tag("trueforge.sandbox.backend"); len(stops[0].Spans) != 1 || stop.Parent() != "" || v != "local" || stops[0].TraceID == first.TraceID {
		t.Fatalf("the reaper's stop: %s; want one root span of a trace of its own, backend local", raw)
	}

	second, raw, err := j.Get(wait, msgs[1]["trace_id"].(string), 6)
	if err != nil {
		t.Fatalf("%v; Jaeger answered:\n%s", err, raw)
	}
	byID := map[string]jaegertest.Span{}
	for _, s := range second.Spans {
		byID[s.SpanID] = s
	}
	var started bool
	for _, s := range second.Spans {
		if s.OperationName == "sandbox start" && byID[s.Parent()].OperationName == "sandbox acquire" {
			v, _ := s.Tag("trueforge.sandbox.backend")
			started = v == "local"
		}
	}
	if !started {
		t.Fatalf("no sandbox start span under an acquire in the resumed turn: %s", spanNames(second))
	}
}
