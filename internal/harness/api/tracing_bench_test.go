package api_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/jaegertest"
	"github.com/trueforge/terraform-provider-trueforge/internal/telemetry"
)

// tracingRounds is how many times BenchmarkAPITracing200 runs the load untraced and
// traced each.
const tracingRounds = 3

// BenchmarkAPITracing200 is BenchmarkAPIConcurrentSessions200 on one server, untraced
// and with every turn traced and exported to a real Jaeger (batch span processor), in
// alternating rounds (off, on, on, off, off, on) so that the machine's other load and
// the store's growth fall on both alike: the sub-benchmarks' sessions/s, off against on,
// are what tracing costs the service (target: <= 5% less).
func BenchmarkAPITracing200(b *testing.B) {
	j := jaegertest.Start(b)
	ctx := context.Background()
	tel, err := telemetry.New(ctx, telemetry.Config{TracesURL: j.OTLP, ServiceName: "trueforge-bench", Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	ba := newBenchAPI(b, true)
	addLoadAgents(b, ba)
	run := func(round int, on bool) {
		name, t := "off", (*telemetry.Provider)(nil)
		if on {
			name, t = "on", tel
		}
		b.Run(fmt.Sprintf("%s-%d", name, round), func(b *testing.B) {
			ba.telemetry = t
			concurrentSessions200(b, ba)
		})
	}
	for round := range tracingRounds {
		first := round%2 == 1
		run(round, first)
		run(round, !first)
	}
	if err := tel.Shutdown(ctx); err != nil {
		b.Fatalf("flushing the spans to Jaeger: %v", err)
	}
}
