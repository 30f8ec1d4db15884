package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// metrics are this process's series, on a registry of its own (no global state: two
// servers in one process, as tests make, count apart). Counters and histograms count
// what this replica did since it started, derived from the events its runs commit and
// from its requests; sum them over replicas. The pool and budget gauges are read from
// the store at each scrape (metrics_store.go) and so are the same on every replica.
//
// The series that the hand-written exposition had keep their names, types and labels,
// so dashboards built on them keep working (README, "Metrics").
type metrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	started   prometheus.Counter
	finished  *prometheus.CounterVec // status
	steps     prometheus.Counter
	mcpCalls  *prometheus.CounterVec // outcome
	runErrors *prometheus.CounterVec // where
	requests  *prometheus.CounterVec // route, method, status
	apiErrors *prometheus.CounterVec // code
	provision prometheus.Histogram
	streams   prometheus.Gauge

	turn       *prometheus.HistogramVec // status
	modelStep  *prometheus.HistogramVec // model
	toolCall   *prometheus.HistogramVec // tool
	mcpCall    *prometheus.HistogramVec // outcome
	poolClaims *prometheus.CounterVec   // environment

	// tools and models bound the values of the tool and model labels.
	tools, models *boundedLabel
}

// Buckets (seconds) of the latency histograms.
var (
	// provisionBuckets: from a warm local sandbox (tens of ms) to a cold Daytona one
	// (tens of s). Unchanged from the hand-written histogram, so its series stay the same.
	provisionBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
	// turnBuckets: a scripted turn (ms) to a long agentic one (tens of minutes).
	turnBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}
	// modelBuckets: a replayed step (ms) to a slow reasoning model (minutes).
	modelBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 300}
	// callBuckets: tool and MCP calls, from a file read (ms) to an exec or a Code Mode
	// script at its timeout (minutes).
	callBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
)

// maxLabelValues caps the distinct values of the tool and model labels: tool names come
// from the model (an invented one gets an error result but is still a call) and model
// names from the model's API, so without a cap either could grow the series without
// bound. Values past the cap count as "other".
const maxLabelValues = 100

// runStatuses, mcpOutcomes and runErrorPlaces are the values of their labels, made present at zero so
// that a dashboard sees each series before the first run (and the families exist, as
// they did in the hand-written exposition).
var (
	runStatuses = []string{store.RunCompleted, store.RunCancelled, store.RunFailed, store.RunInterrupted}
	mcpOutcomes = []string{events.OutcomeCompleted, events.OutcomeFailed, events.OutcomeDenied, events.OutcomeLimit, events.OutcomeUnknown}
	// runErrorPlaces are the wheres of the runner's error events ("run" for none).
	runErrorPlaces = []string{"model", "run"}
)

// newMetrics registers the server's series, the Go runtime and process collectors, and
// extra (the store's gauges) on a new registry.
func newMetrics(log *slog.Logger, liveRuns func() int, extra ...prometheus.Collector) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), tools: newBoundedLabel(maxLabelValues), models: newBoundedLabel(maxLabelValues)}
	f := factory{m.reg}
	m.started = f.counter("trueforge_runs_started_total", "Runs (user messages) this replica started.")
	m.finished = f.counterVec("trueforge_runs_finished_total", "Runs this replica finished, by final status.", "status")
	f.gaugeFunc("trueforge_runs_live", "Runs running in this replica now.", func() float64 { return float64(liveRuns()) })
	m.steps = f.counter("trueforge_model_steps_total", "Model steps (turns of the agent loop) of runs in this replica.")
	m.provision = f.histogram("trueforge_sandbox_provision_seconds", "How long provisioning a session's sandbox took, for runs in this replica.", provisionBuckets)
	m.mcpCalls = f.counterVec("trueforge_mcp_calls_total", "MCP calls bridged for Code Mode scripts, by outcome.", "outcome")
	m.runErrors = f.counterVec("trueforge_run_errors_total", "Errors that ended runs in this replica (error events), by where they happened.", "where")
	m.requests = f.counterVec("trueforge_http_requests_total", "HTTP requests, by route, method and status.", "route", "method", "status")
	m.apiErrors = f.counterVec("trueforge_http_errors_total", "Error answers of the API, by error code (internal: a 500).", "code")
	m.streams = f.gauge("trueforge_event_streams", "Event streams (GET .../events) open now.")

	m.turn = f.histogramVec("trueforge_turn_seconds", "How long runs of this replica took, from their user message to run_finished, by final status.", turnBuckets, "status")
	m.modelStep = f.histogramVec("trueforge_model_step_seconds", "How long model steps took (from the event before the call to the model's message), by the model that answered.", modelBuckets, "model")
	m.toolCall = f.histogramVec("trueforge_tool_call_seconds", "How long tool calls took (tool_call to its tool_result), by tool; exec and the file tools are the sandbox's operations.", callBuckets, "tool")
	m.mcpCall = f.histogramVec("trueforge_mcp_call_seconds", "How long MCP calls bridged for Code Mode scripts took, by outcome.", callBuckets, "outcome")
	m.poolClaims = f.counterVec("trueforge_pool_claims_total", "Sandboxes this replica's sessions took from an environment's warm pool, by environment.", "environment")

	for _, s := range runStatuses {
		m.finished.WithLabelValues(s)
	}
	for _, o := range mcpOutcomes {
		m.mcpCalls.WithLabelValues(o)
	}
	for _, w := range runErrorPlaces {
		m.runErrors.WithLabelValues(w)
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(extra...)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// A failing store gauge is logged and left out; the other series are served.
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slogPrinter{log},
	})
	return m
}

// factory makes series and registers them on reg.
type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f factory) gaugeFunc(name, help string, fn func() float64) {
	f.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

// slogPrinter is promhttp's error log on the server's logger.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) {
	p.log.Warn("serving /metrics", "err", strings.TrimSpace(fmt.Sprintln(v...)))
}

func (m *metrics) runStarted() { m.started.Inc() }

func (m *metrics) runFinished(status string) {
	if status == "" {
		status = "unknown"
	}
	m.finished.WithLabelValues(status).Inc()
}

func (m *metrics) request(route, method string, status int) {
	m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
}

func (m *metrics) apiError(code string) { m.apiErrors.WithLabelValues(code).Inc() }

// count counts what a committed event of a run here says that needs no other event: a
// model step, a sandbox provisioned (how long it took, whether from a warm pool), a
// bridged MCP call (and its duration), an error. The latencies that span two events are
// runObserver's.
func (m *metrics) count(kind string, f eventFields) {
	switch kind {
	case events.KindModelMessage:
		m.steps.Inc()
	case events.KindSandboxProvisioned:
		m.provision.Observe(float64(f.TookMS) / 1000)
		if strings.HasPrefix(f.SandboxID, lifecycle.PoolIDPrefix) {
			m.poolClaims.WithLabelValues(f.Environment).Inc()
		}
	case events.KindMCPCall:
		m.mcpCalls.WithLabelValues(f.Outcome).Inc()
		m.mcpCall.WithLabelValues(f.Outcome).Observe(float64(f.DurationMS) / 1000)
	case events.KindError:
		where := f.Where
		if where == "" {
			where = "run"
		}
		m.runErrors.WithLabelValues(where).Inc()
	}
}

// boundedLabel hands out at most max distinct values of a label, then "other".
type boundedLabel struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
}

func newBoundedLabel(maxValues int) *boundedLabel {
	return &boundedLabel{max: maxValues, seen: map[string]bool{}}
}

func (b *boundedLabel) value(v string) string {
	if v == "" {
		return "unknown"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[v] {
		return v
	}
	if len(b.seen) >= b.max {
		return "other"
	}
	b.seen[v] = true
	return v
}

// serveMetrics answers GET /metrics in the format the scraper asks for (the text
// format 0.0.4 when it asks for none).
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request, _ *caller) error {
	w.Header().Set("Cache-Control", "no-store")
	s.metrics.handler.ServeHTTP(w, r)
	return nil
}
