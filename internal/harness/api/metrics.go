package api

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
)

// metrics are this process's counters, written by hand in the Prometheus text format
// (version 0.0.4): no client library needed for a dozen series. They count what this
// replica did since it started; sum them over replicas.
type metrics struct {
	mu        sync.Mutex
	started   int64
	finished  map[string]int64 // by status
	steps     int64
	mcpCalls  map[string]int64 // by outcome
	runErrors map[string]int64 // error events, by where
	requests  map[[3]string]int64
	apiErrors map[string]int64 // error answers, by code
	provision histogram
	streams   atomic.Int64
}

// provisionBuckets are the upper bounds (seconds) of the provisioning latency histogram:
// from a warm local sandbox (tens of ms) to a cold Daytona one (tens of s).
var provisionBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

type histogram struct {
	counts []int64 // per bucket, not cumulative
	sum    float64
	n      int64
}

func newMetrics() *metrics {
	return &metrics{finished: map[string]int64{}, mcpCalls: map[string]int64{}, runErrors: map[string]int64{},
		requests: map[[3]string]int64{}, apiErrors: map[string]int64{},
		provision: histogram{counts: make([]int64, len(provisionBuckets))}}
}

func (m *metrics) runStarted() {
	m.mu.Lock()
	m.started++
	m.mu.Unlock()
}

func (m *metrics) runFinished(status string) {
	if status == "" {
		status = "unknown"
	}
	m.mu.Lock()
	m.finished[status]++
	m.mu.Unlock()
}

func (m *metrics) request(route, method string, status int) {
	m.mu.Lock()
	m.requests[[3]string{route, method, strconv.Itoa(status)}]++
	m.mu.Unlock()
}

func (m *metrics) apiError(code string) {
	m.mu.Lock()
	m.apiErrors[code]++
	m.mu.Unlock()
}

// observe counts what a committed event of a run here says: a model step, a sandbox
// provisioned (and how long it took), a bridged MCP call, an error.
func (m *metrics) observe(kind string, payload json.RawMessage) {
	switch kind {
	case events.KindModelMessage:
		m.mu.Lock()
		m.steps++
		m.mu.Unlock()
	case events.KindSandboxProvisioned:
		p, ok := events.As[events.SandboxProvisioned](kind, payload)
		if !ok {
			return
		}
		sec := float64(p.TookMS) / 1000
		m.mu.Lock()
		for i, b := range provisionBuckets {
			if sec <= b {
				m.provision.counts[i]++
				break
			}
		}
		m.provision.sum += sec
		m.provision.n++
		m.mu.Unlock()
	case events.KindMCPCall:
		p, ok := events.As[events.MCPCall](kind, payload)
		if !ok {
			return
		}
		m.mu.Lock()
		m.mcpCalls[p.Outcome]++
		m.mu.Unlock()
	case events.KindError:
		p, ok := events.As[events.Error](kind, payload)
		if !ok {
			return
		}
		where := p.Where
		if where == "" {
			where = "run"
		}
		m.mu.Lock()
		m.runErrors[where]++
		m.mu.Unlock()
	}
}

// serveMetrics answers GET /metrics.
func (s *Server) serveMetrics(w http.ResponseWriter, _ *http.Request, _ *caller) error {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	s.metrics.write(w, s.LiveRuns())
	return nil
}

func (m *metrics) write(w io.Writer, liveRuns int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	family := func(name, typ, help string) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	family("trueforge_runs_started_total", "counter", "Runs (user messages) this replica started.")
	fmt.Fprintf(w, "trueforge_runs_started_total %d\n", m.started)
	family("trueforge_runs_finished_total", "counter", "Runs this replica finished, by final status.")
	for _, k := range slices.Sorted(maps.Keys(m.finished)) {
		fmt.Fprintf(w, "trueforge_runs_finished_total{status=%s} %d\n", label(k), m.finished[k])
	}
	family("trueforge_runs_live", "gauge", "Runs running in this replica now.")
	fmt.Fprintf(w, "trueforge_runs_live %d\n", liveRuns)
	family("trueforge_model_steps_total", "counter", "Model steps (turns of the agent loop) of runs in this replica.")
	fmt.Fprintf(w, "trueforge_model_steps_total %d\n", m.steps)
	family("trueforge_sandbox_provision_seconds", "histogram", "How long provisioning a session's sandbox took, for runs in this replica.")
	cum := int64(0)
	for i, b := range provisionBuckets {
		cum += m.provision.counts[i]
		fmt.Fprintf(w, "trueforge_sandbox_provision_seconds_bucket{le=%s} %d\n", label(strconv.FormatFloat(b, 'g', -1, 64)), cum)
	}
	fmt.Fprintf(w, "trueforge_sandbox_provision_seconds_bucket{le=\"+Inf\"} %d\n", m.provision.n)
	fmt.Fprintf(w, "trueforge_sandbox_provision_seconds_sum %s\n", strconv.FormatFloat(m.provision.sum, 'g', -1, 64))
	fmt.Fprintf(w, "trueforge_sandbox_provision_seconds_count %d\n", m.provision.n)
	family("trueforge_mcp_calls_total", "counter", "MCP calls bridged for Code Mode scripts, by outcome.")
	for _, k := range slices.Sorted(maps.Keys(m.mcpCalls)) {
		fmt.Fprintf(w, "trueforge_mcp_calls_total{outcome=%s} %d\n", label(k), m.mcpCalls[k])
	}
	family("trueforge_run_errors_total", "counter", "Errors that ended runs in this replica (error events), by where they happened.")
	for _, k := range slices.Sorted(maps.Keys(m.runErrors)) {
		fmt.Fprintf(w, "trueforge_run_errors_total{where=%s} %d\n", label(k), m.runErrors[k])
	}
	family("trueforge_http_requests_total", "counter", "HTTP requests, by route, method and status.")
	keys := make([][3]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		if a[1] != b[1] {
			return a[1] < b[1]
		}
		return a[2] < b[2]
	})
	for _, k := range keys {
		fmt.Fprintf(w, "trueforge_http_requests_total{route=%s,method=%s,status=%s} %d\n", label(k[0]), label(k[1]), label(k[2]), m.requests[k])
	}
	family("trueforge_http_errors_total", "counter", "Error answers of the API, by error code (internal: a 500).")
	for _, k := range slices.Sorted(maps.Keys(m.apiErrors)) {
		fmt.Fprintf(w, "trueforge_http_errors_total{code=%s} %d\n", label(k), m.apiErrors[k])
	}
	family("trueforge_event_streams", "gauge", "Event streams (GET .../events) open now.")
	fmt.Fprintf(w, "trueforge_event_streams %d\n", m.streams.Load())
}

// label quotes a label value as the text format escapes it.
func label(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(v) + `"`
}
