package api

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
)

// legacyMetrics is the hand-written exposition that client_golang replaced, kept
// verbatim (renamed) as the baseline of the metrics benchmarks: its scrape and its
// per-event observe are what the new ones are measured against, in the same run.
type legacyMetrics struct {
	mu        sync.Mutex
	started   int64
	finished  map[string]int64 // by status
	steps     int64
	mcpCalls  map[string]int64 // by outcome
	runErrors map[string]int64 // error events, by where
	requests  map[[3]string]int64
	apiErrors map[string]int64 // error answers, by code
	provision legacyHistogram
	streams   atomic.Int64
}

type legacyHistogram struct {
	counts []int64 // per bucket, not cumulative
	sum    float64
	n      int64
}

func newLegacyMetrics() *legacyMetrics {
	return &legacyMetrics{finished: map[string]int64{}, mcpCalls: map[string]int64{}, runErrors: map[string]int64{},
		requests: map[[3]string]int64{}, apiErrors: map[string]int64{},
		provision: legacyHistogram{counts: make([]int64, len(provisionBuckets))}}
}

func (m *legacyMetrics) runStarted() {
	m.mu.Lock()
	m.started++
	m.mu.Unlock()
}

func (m *legacyMetrics) runFinished(status string) {
	if status == "" {
		status = "unknown"
	}
	m.mu.Lock()
	m.finished[status]++
	m.mu.Unlock()
}

func (m *legacyMetrics) request(route, method string, status int) {
	m.mu.Lock()
	m.requests[[3]string{route, method, strconv.Itoa(status)}]++
	m.mu.Unlock()
}

func (m *legacyMetrics) apiError(code string) {
	m.mu.Lock()
	m.apiErrors[code]++
	m.mu.Unlock()
}

// observe counts what a committed event of a run here says: a model step, a sandbox
// provisioned (and how long it took), a bridged MCP call, an error.
func (m *legacyMetrics) observe(kind string, payload json.RawMessage) {
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

func (m *legacyMetrics) write(w io.Writer, liveRuns int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	family := func(name, typ, help string) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	family("trueforge_runs_started_total", "counter", "Runs (user messages) this replica started.")
	fmt.Fprintf(w, "trueforge_runs_started_total %d\n", m.started)
	family("trueforge_runs_finished_total", "counter", "Runs this replica finished, by final status.")
	for _, k := range slices.Sorted(maps.Keys(m.finished)) {
		fmt.Fprintf(w, "trueforge_runs_finished_total{status=%s} %d\n", legacyLabel(k), m.finished[k])
	}
	family("trueforge_runs_live", "gauge", "Runs running in this replica now.")
	fmt.Fprintf(w, "trueforge_runs_live %d\n", liveRuns)
	family("trueforge_model_steps_total", "counter", "Model steps (turns of the agent loop) of runs in this replica.")
	fmt.Fprintf(w, "trueforge_model_steps_total %d\n", m.steps)
	family("trueforge_sandbox_provision_seconds", "legacyHistogram", "How long provisioning a session's sandbox took, for runs in this replica.")
	cum := int64(0)
	for i, b := range provisionBuckets {
		cum += m.provision.counts[i]
		fmt.Fprintf(w, "trueforge_sandbox_provision_seconds_bucket{le=%s} %d\n", legacyLabel(strconv.FormatFloat(b, 'g', -1, 64)), cum)
	}
	fmt.Fprintf(w, "trueforge_sandbox_provision_seconds_bucket{le=\"+Inf\"} %d\n", m.provision.n)
	fmt.Fprintf(w, "trueforge_sandbox_provision_seconds_sum %s\n", strconv.FormatFloat(m.provision.sum, 'g', -1, 64))
	fmt.Fprintf(w, "trueforge_sandbox_provision_seconds_count %d\n", m.provision.n)
	family("trueforge_mcp_calls_total", "counter", "MCP calls bridged for Code Mode scripts, by outcome.")
	for _, k := range slices.Sorted(maps.Keys(m.mcpCalls)) {
		fmt.Fprintf(w, "trueforge_mcp_calls_total{outcome=%s} %d\n", legacyLabel(k), m.mcpCalls[k])
	}
	family("trueforge_run_errors_total", "counter", "Errors that ended runs in this replica (error events), by where they happened.")
	for _, k := range slices.Sorted(maps.Keys(m.runErrors)) {
		fmt.Fprintf(w, "trueforge_run_errors_total{where=%s} %d\n", legacyLabel(k), m.runErrors[k])
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
		fmt.Fprintf(w, "trueforge_http_requests_total{route=%s,method=%s,status=%s} %d\n", legacyLabel(k[0]), legacyLabel(k[1]), legacyLabel(k[2]), m.requests[k])
	}
	family("trueforge_http_errors_total", "counter", "Error answers of the API, by error code (internal: a 500).")
	for _, k := range slices.Sorted(maps.Keys(m.apiErrors)) {
		fmt.Fprintf(w, "trueforge_http_errors_total{code=%s} %d\n", legacyLabel(k), m.apiErrors[k])
	}
	family("trueforge_event_streams", "gauge", "Event streams (GET .../events) open now.")
	fmt.Fprintf(w, "trueforge_event_streams %d\n", m.streams.Load())
}

// label quotes a label value as the text format escapes it.
func legacyLabel(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(v) + `"`
}
