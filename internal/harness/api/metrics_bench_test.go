package api

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
)

// A turn's committed events as the observe path sees them: a step with an exec, its
// sandbox provisioned, a Code Mode step with two MCP calls, the answer.
func benchTurn(b *testing.B) []struct {
	kind  string
	raw   json.RawMessage
	value events.Payload
} {
	b.Helper()
	var out []struct {
		kind  string
		raw   json.RawMessage
		value events.Payload
	}
	for _, p := range []events.Payload{
		events.UserMessage{Text: "Build it and tell me what failed."},
		events.ModelMessage{Model: "m", Text: "Running the build.", ToolCalls: []model.ToolCall{{ID: "c1", Name: "exec"}}},
		events.Usage{},
		events.ToolCall{ID: "c1", Name: "exec", Arguments: json.RawMessage(`{"command":"make"}`)},
		events.SandboxProvisioned{SandboxID: "tf-s-1", Environment: "default", TookMS: 740},
		events.ToolResult{ID: "c1", Name: "exec", Text: "ok"},
		events.ModelMessage{Model: "m", ToolCalls: []model.ToolCall{{ID: "c2", Name: "run_code"}}},
		events.Usage{},
		events.ToolCall{ID: "c2", Name: "run_code"},
		events.MCPCall{ToolCallID: "c2", Call: 1, Tool: "kb__lookup", Outcome: events.OutcomeCompleted, DurationMS: 120},
		events.MCPCall{ToolCallID: "c2", Call: 2, Tool: "kb__lookup", Outcome: events.OutcomeDenied},
		events.ToolResult{ID: "c2", Name: "run_code", Text: "2 results"},
		events.ModelMessage{Model: "m", Text: "Nothing failed."},
		events.Usage{},
		events.RunFinished{Status: "completed", Steps: 3},
	} {
		raw, err := events.Encode(p)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, struct {
			kind  string
			raw   json.RawMessage
			value events.Payload
		}{p.Kind(), raw, p})
	}
	return out
}

// BenchmarkMetricsObserve is the per-event path of a run's committed events: the
// hand-written metrics (legacy, the baseline) against client_golang's with the
// observer that times turns, steps and calls, decoding each payload (as for events read
// back from the store) and, "-value", reading the events the run passes along with
// their bytes, as a run's own are. An op is one turn's 15 events. Parallel runs every
// core's turns at once: contention on the counters.
func BenchmarkMetricsObserve(b *testing.B) {
	turn := benchTurn(b)
	b.Run("legacy", func(b *testing.B) {
		m := newLegacyMetrics()
		b.ReportAllocs()
		for b.Loop() {
			for _, e := range turn {
				m.observe(e.kind, e.raw)
			}
		}
	})
	b.Run("client_golang", func(b *testing.B) {
		m := newMetrics(slog.New(slog.DiscardHandler), func() int { return 0 })
		b.ReportAllocs()
		for b.Loop() {
			o := m.run()
			for _, e := range turn {
				o.observe(e.kind, e.raw, nil)
			}
		}
	})
	b.Run("client_golang-value", func(b *testing.B) {
		m := newMetrics(slog.New(slog.DiscardHandler), func() int { return 0 })
		b.ReportAllocs()
		for b.Loop() {
			o := m.run()
			for _, e := range turn {
				o.observe(e.kind, e.raw, e.value)
			}
		}
	})
	b.Run("legacy-parallel", func(b *testing.B) {
		m := newLegacyMetrics()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				for _, e := range turn {
					m.observe(e.kind, e.raw)
				}
			}
		})
	})
	b.Run("client_golang-parallel", func(b *testing.B) {
		m := newMetrics(slog.New(slog.DiscardHandler), func() int { return 0 })
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				o := m.run()
				for _, e := range turn {
					o.observe(e.kind, e.raw, e.value)
				}
			}
		})
	})
}

// populate gives both implementations the same series: 30 routes with three statuses
// each, five error codes, a hundred turns' events.
func populate(b *testing.B, legacy *legacyMetrics, m *metrics) {
	turn := benchTurn(b)
	for i := 0; i < 100; i++ {
		o := m.run()
		for _, e := range turn {
			legacy.observe(e.kind, e.raw)
			o.observe(e.kind, e.raw, e.value)
		}
		legacy.runStarted()
		m.runStarted()
		legacy.runFinished("completed")
		m.runFinished("completed")
	}
	for r := 0; r < 30; r++ {
		for _, st := range []int{200, 404, 500} {
			route := fmt.Sprintf("/api/v1/route%d/{id}", r)
			legacy.request(route, "GET", st)
			m.request(route, "GET", st)
		}
	}
	for c := 0; c < 5; c++ {
		legacy.apiError(fmt.Sprint("code", c))
		m.apiError(fmt.Sprint("code", c))
	}
}

// BenchmarkMetricsScrape is one GET /metrics's exposition: the hand-written one
// (legacy, the baseline), client_golang's with the same series plus the new histograms
// and the Go runtime and process collectors, and that with the store's pool and budget
// gauges read from a SQLite store (three statements per scrape).
func BenchmarkMetricsScrape(b *testing.B) {
	legacy := newLegacyMetrics()
	plain := newMetrics(slog.New(slog.DiscardHandler), func() int { return 3 })
	populate(b, legacy, plain)
	st := harnesstest.NewStore(b)
	harnesstest.SeedNoSandbox(b, st)
	withStore := newMetrics(slog.New(slog.DiscardHandler), func() int { return 3 }, newStoreGauges(st, nil))
	populate(b, newLegacyMetrics(), withStore)
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	b.Run("legacy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			legacy.write(io.Discard, 3)
		}
	})
	for _, tc := range []struct {
		name string
		m    *metrics
	}{{"client_golang", plain}, {"client_golang+store", withStore}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				tc.m.handler.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
