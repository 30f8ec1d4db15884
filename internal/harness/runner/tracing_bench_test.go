package runner_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/jaegertest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/telemetry"
)

// What tracing costs a turn: BenchmarkTurnScripted's turns (scripted model, no sandbox,
// every store write), one runner untraced and one exporting every turn to a real Jaeger
// through the batch span processor, turn for turn interleaved so that the machine's
// other load falls on both alike. Reports each one's p50 and the difference (target:
// tracing on adds <= 0.1 ms per turn at p50).
func BenchmarkTurnTracing(b *testing.B) {
	j := jaegertest.Start(b)
	ctx := context.Background()
	tel, err := telemetry.New(ctx, telemetry.Config{TracesURL: j.OTLP, ServiceName: "trueforge-bench", Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	st, a := benchAgent(b)
	off := (&fixture{env: &harnesstest.Env{Store: st}}).runnerNoSandbox(b, a.Name)
	on := (&fixture{env: &harnesstest.Env{Store: st}}).runnerNoSandbox(b, a.Name)
	on.Telemetry = tel
	turn := func(r *runner.Runner, sid string) time.Duration {
		t0 := time.Now()
		out, err := r.Run(ctx, sid, "What is the capital of France?", nil)
		d := time.Since(t0)
		if err != nil || out.Status != store.RunCompleted {
			b.Fatalf("turn: %v %s", err, out.Status)
		}
		return d
	}
	var offD, onD []time.Duration
	var offSID, onSID string
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%10 == 0 {
			if offSID, err = off.NewSession(ctx, harnesstest.Owner); err != nil {
				b.Fatal(err)
			}
			if onSID, err = on.NewSession(ctx, harnesstest.Owner); err != nil {
				b.Fatal(err)
			}
		}
		if i%2 == 0 {
			offD = append(offD, turn(off, offSID))
			onD = append(onD, turn(on, onSID))
		} else {
			onD = append(onD, turn(on, onSID))
			offD = append(offD, turn(off, offSID))
		}
	}
	b.StopTimer()
	if err := tel.Shutdown(ctx); err != nil {
		b.Fatalf("flushing the spans to Jaeger: %v", err)
	}
	p50 := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2]) / float64(time.Millisecond)
	}
	offP, onP := p50(offD), p50(onD)
	b.ReportMetric(offP, "off-p50-ms")
	b.ReportMetric(onP, "on-p50-ms")
	b.ReportMetric(onP-offP, "added-p50-ms")
}
