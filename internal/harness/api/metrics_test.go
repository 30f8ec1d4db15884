package api_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/budgets"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// families is a /metrics answer as the Prometheus text parser reads it.
type families map[string]*dto.MetricFamily

// scrape reads /metrics as an admin and parses it with the Prometheus text parser: a
// malformed exposition fails the test.
func (f *fixture) scrape() families {
	f.t.Helper()
	r := f.req("GET", "/metrics", "root", nil)
	want(f.t, "metrics as an admin", r, http.StatusOK, "")
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(r.body))
	if err != nil {
		f.t.Fatalf("/metrics does not parse: %v\n%s", err, r.body)
	}
	return fams
}

// family is the family name, which must exist with type typ.
func (fs families) family(t *testing.T, name string, typ dto.MetricType) *dto.MetricFamily {
	t.Helper()
	mf := fs[name]
	if mf == nil {
		t.Fatalf("/metrics has no %s", name)
	}
	if mf.GetType() != typ {
		t.Fatalf("%s is a %v; want a %v", name, mf.GetType(), typ)
	}
	return mf
}

// series is the series of family name whose labels are exactly labels (name=value
// pairs); it fails the test when there is none.
func (fs families) series(t *testing.T, name string, typ dto.MetricType, labels ...string) *dto.Metric {
	t.Helper()
	mf := fs.family(t, name, typ)
	for _, m := range mf.GetMetric() {
		if labelsAre(m, labels) {
			return m
		}
	}
	t.Fatalf("%s has no series %v; it has %v", name, labels, mf.GetMetric())
	return nil
}

func labelsAre(m *dto.Metric, labels []string) bool {
	if len(m.GetLabel())*2 != len(labels) {
		return false
	}
	for i, l := range m.GetLabel() {
		// The parser sorts labels by name; so do the callers.
		if l.GetName() != labels[2*i] || l.GetValue() != labels[2*i+1] {
			return false
		}
	}
	return true
}

// value is a counter's or gauge's value.
func (fs families) value(t *testing.T, name string, typ dto.MetricType, labels ...string) float64 {
	t.Helper()
	m := fs.series(t, name, typ, labels...)
	if typ == dto.MetricType_COUNTER {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// histogram checks that a histogram series has buckets, cumulative and ending at its
// count, which must be want, and returns it.
func (fs families) histogram(t *testing.T, name string, want uint64, labels ...string) *dto.Histogram {
	t.Helper()
	h := fs.series(t, name, dto.MetricType_HISTOGRAM, labels...).GetHistogram()
	if h.GetSampleCount() != want {
		t.Errorf("%s%v counted %d; want %d", name, labels, h.GetSampleCount(), want)
	}
	if len(h.GetBucket()) < 5 {
		t.Fatalf("%s has %d buckets", name, len(h.GetBucket()))
	}
	prev := uint64(0)
	for _, b := range h.GetBucket() {
		if b.GetCumulativeCount() < prev || b.GetCumulativeCount() > h.GetSampleCount() {
			t.Fatalf("%s: bucket le=%v holds %d after %d, of %d", name, b.GetUpperBound(), b.GetCumulativeCount(), prev, h.GetSampleCount())
		}
		prev = b.GetCumulativeCount()
	}
	if h.GetSampleSum() < 0 {
		t.Errorf("%s%v: sum %v", name, labels, h.GetSampleSum())
	}
	return h
}

// Metrics: an admin's (or public), counting runs, steps and requests, with the names,
// types and labels the hand-written exposition had.
func TestMetrics(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	harnesstest.AddAgent(t, f.st, "talker", "", harnesstest.AgentSpec{"model": script(text("Hi."))})
	f.turn("alice", f.newSession("alice", "talker"), "hi")
	want(t, "metrics without a token", f.req("GET", "/metrics", "", nil), http.StatusUnauthorized, api.CodeUnauthorized)
	want(t, "metrics as a user", f.req("GET", "/metrics", "alice", nil), http.StatusForbidden, api.CodeAdminOnly)
	r := f.req("GET", "/metrics", "root", nil)
	if ct := r.Header.Get("Content-Type"); expfmt.ResponseFormat(r.Header).FormatType() != expfmt.TypeTextPlain {
		t.Errorf("Content-Type %q; want the text format", ct)
	}
	if r.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q", r.Header.Get("Cache-Control"))
	}
	fs := f.scrape()
	const c, g = dto.MetricType_COUNTER, dto.MetricType_GAUGE
	for _, tc := range []struct {
		name   string
		typ    dto.MetricType
		labels []string
		want   float64
	}{
		{"trueforge_runs_started_total", c, nil, 1},
		{"trueforge_runs_finished_total", c, []string{"status", "completed"}, 1},
		{"trueforge_runs_finished_total", c, []string{"status", "failed"}, 0},
		{"trueforge_runs_live", g, nil, 0},
		{"trueforge_model_steps_total", c, nil, 1},
		{"trueforge_mcp_calls_total", c, []string{"outcome", "completed"}, 0},
		{"trueforge_run_errors_total", c, []string{"where", "model"}, 0},
		{"trueforge_http_requests_total", c, []string{"method", "POST", "route", "/api/v1/sessions/{id}/messages", "status", "202"}, 1},
		{"trueforge_http_requests_total", c, []string{"method", "GET", "route", "/metrics", "status", "401"}, 1},
		{"trueforge_http_errors_total", c, []string{"code", "admin_only"}, 1},
		{"trueforge_event_streams", g, nil, 0},
	} {
		if got := fs.value(t, tc.name, tc.typ, tc.labels...); got != tc.want {
			t.Errorf("%s%v = %v; want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	fs.histogram(t, "trueforge_sandbox_provision_seconds", 0)
	fs.histogram(t, "trueforge_turn_seconds", 1, "status", "completed")
	fs.histogram(t, "trueforge_model_step_seconds", 1, "model", "scripted replay (1 turns)")
	// The runtime and process collectors (process_* reads /proc: Linux).
	fs.family(t, "go_goroutines", g)
	fs.family(t, "go_memstats_alloc_bytes", g)
	if runtime.GOOS == "linux" {
		fs.family(t, "process_cpu_seconds_total", c)
		fs.family(t, "process_resident_memory_bytes", g)
		fs.family(t, "process_open_fds", g)
	}
	pub := newFixture(t, fixtureOpts{cfg: func(c *api.Config) { c.MetricsPublic = true }})
	want(t, "public metrics", pub.req("GET", "/metrics", "", nil), http.StatusOK, "")
}

// After a turn whose exec ran in a sandbox claimed from the warm pool, the latency
// histograms count the turn, its two model steps and its tool call, the provisioning
// counts the claim, and the pool gauges read the pool as the store holds it.
func TestMetricsOfASandboxTurnAndItsPool(t *testing.T) {
	f := newFixture(t, fixtureOpts{sandboxes: true})
	ctx := context.Background()
	e, err := f.st.GetEnvironment(ctx, "default")
	must(t, err)
	e.CPU, e.MemoryGB, e.DiskGB, e.BlockAll = 0, 0, 0, true
	e.Settings.WarmPool = &store.WarmPool{Size: 2, MaxAgeSeconds: 3600}
	must(t, f.st.UpdateEnvironment(ctx, e))
	if trs, err := f.manager.KeepPools(ctx); err != nil || len(trs) != 2 {
		t.Fatalf("filling the pool: %+v, %v", trs, err)
	}
	fs := f.scrape()
	if got := fs.value(t, "trueforge_pool_members", dto.MetricType_GAUGE, "environment", "default", "state", "ready"); got != 2 {
		t.Fatalf("ready members before the turn: %v; want 2", got)
	}
	if got := fs.value(t, "trueforge_pool_size", dto.MetricType_GAUGE, "environment", "default"); got != 2 {
		t.Fatalf("pool size %v; want 2", got)
	}

	harnesstest.AddAgent(t, f.st, "worker", "default", harnesstest.AgentSpec{"sandbox": harnesstest.Sandbox("default", 30, 60, 120),
		"model": script(execCall("echo hi"), text("done"))})
	sid := f.newSession("alice", "worker")
	f.turn("alice", sid, "go")
	rec, err := f.st.GetSessionSandbox(ctx, sid)
	must(t, err)
	if !bytes.HasPrefix([]byte(rec.SandboxID), []byte(lifecycle.PoolIDPrefix)) {
		t.Fatalf("the session's sandbox %s is not a pool member", rec.SandboxID)
	}

	fs = f.scrape()
	fs.histogram(t, "trueforge_turn_seconds", 1, "status", "completed")
	fs.histogram(t, "trueforge_model_step_seconds", 2, "model", "scripted replay (2 turns)")
	fs.histogram(t, "trueforge_tool_call_seconds", 1, "tool", "exec")
	fs.histogram(t, "trueforge_sandbox_provision_seconds", 1)
	if got := fs.value(t, "trueforge_model_steps_total", dto.MetricType_COUNTER); got != 2 {
		t.Errorf("model steps %v; want 2", got)
	}
	if got := fs.value(t, "trueforge_pool_claims_total", dto.MetricType_COUNTER, "environment", "default"); got != 1 {
		t.Errorf("pool claims %v; want 1", got)
	}
	if got := fs.value(t, "trueforge_pool_members", dto.MetricType_GAUGE, "environment", "default", "state", "ready"); got != 1 {
		t.Errorf("ready members after the claim: %v; want 1", got)
	}
	// The exec took time, and the turn at least as long. (The claim may take under the
	// millisecond that provisioning is recorded in.)
	turn := fs.series(t, "trueforge_turn_seconds", dto.MetricType_HISTOGRAM, "status", "completed").GetHistogram().GetSampleSum()
	call := fs.series(t, "trueforge_tool_call_seconds", dto.MetricType_HISTOGRAM, "tool", "exec").GetHistogram().GetSampleSum()
	if call <= 0 || turn < call {
		t.Errorf("turn %vs shorter than its exec %vs", turn, call)
	}
}

// The budget gauges show each declared budget's limits and what its counters in open
// windows spent, charged through the real meter; the pool gauges count members by state.
// On SQLite and on PostgreSQL as a harness role (the statements differ in what each
// database accepts: the aggregate over a bounded subquery, the casts of the sums).
func TestMetricsStoreGauges(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { checkStoreGauges(t, nil) })
	t.Run("postgresql", func(t *testing.T) {
		_, harnessURL := harnessRoleDB(t, func(*store.Store) {})
		checkStoreGauges(t, storetest.Open(t, harnessURL))
	})
}

func checkStoreGauges(t *testing.T, st *store.Store) {
	path := filepath.Join(t.TempDir(), "policy.json")
	must(t, os.WriteFile(path, []byte(`{"rules": [], "default": "allow", "budgets": [
		{"name": "tok", "per": ["user"], "window": "per_day", "tokens": 1000},
		{"name": "turn", "per": ["user"], "window": "per_turn", "calls": 5}]}`), 0o600))
	pol, err := policy.Load(path)
	must(t, err)
	f := newFixture(t, fixtureOpts{st: st, cfg: func(c *api.Config) { c.Budgets = pol.Budgets }})
	ctx := context.Background()
	for i, state := range []string{store.PoolReady, store.PoolReady, store.PoolCreating} {
		must(t, f.st.PutPoolSandbox(ctx, store.PoolSandbox{SandboxID: fmt.Sprintf("%sdefault-%d", lifecycle.PoolIDPrefix, i),
			Environment: "default", Provider: "local", SnapshotID: "s", Config: "c", State: state, CreatedAt: time.Now()}))
	}
	m := &budgets.Meter{Store: f.st, Policy: pol}
	m.SpendTokens(ctx, policy.Subject{User: "alice", Agent: "a", Turn: "r-1"}, 300)
	m.SpendTokens(ctx, policy.Subject{User: "bob", Agent: "a", Turn: "r-2"}, 120)
	m.SpendTokens(ctx, policy.Subject{User: "alice", Agent: "a", Turn: "r-3"}, 50)
	fs := f.scrape()
	const g = dto.MetricType_GAUGE
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"trueforge_budget_limit", []string{"budget", "tok", "dimension", "tokens"}, 1000},
		{"trueforge_budget_limit", []string{"budget", "turn", "dimension", "calls"}, 5},
		{"trueforge_budget_counters", []string{"budget", "tok"}, 2},
		{"trueforge_budget_used_max", []string{"budget", "tok", "dimension", "tokens"}, 350},
		{"trueforge_budget_used", []string{"budget", "tok", "dimension", "tokens"}, 470},
		{"trueforge_budget_used_max", []string{"budget", "tok", "dimension", "sandbox_seconds"}, 0},
		{"trueforge_pool_members", []string{"environment", "default", "state", "ready"}, 2},
		{"trueforge_pool_members", []string{"environment", "default", "state", "creating"}, 1},
	} {
		// Labels sort by name: budget before dimension.
		if got := fs.value(t, tc.name, g, tc.labels...); got != tc.want {
			t.Errorf("%s%v = %v; want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	for _, m := range fs.family(t, "trueforge_budget_counters", g).GetMetric() {
		if m.GetLabel()[0].GetValue() == "turn" {
			t.Errorf("a per_turn budget's counters were read: %v", m)
		}
	}
}

// A store that fails leaves its gauges out of the scrape, logged, and the rest is
// served: a database outage does not blind the operator to the process's own series.
func TestMetricsWithoutTheStore(t *testing.T) {
	var logged bytes.Buffer
	f := newFixture(t, fixtureOpts{cfg: func(c *api.Config) {
		c.MetricsPublic = true
		c.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	}})
	must(t, f.st.Close())
	r := f.req("GET", "/metrics", "", nil)
	want(t, "metrics with the store closed", r, http.StatusOK, "")
	p := expfmt.NewTextParser(model.LegacyValidation)
	fs, err := p.TextToMetricFamilies(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, r.body)
	}
	families(fs).family(t, "trueforge_runs_started_total", dto.MetricType_COUNTER)
	families(fs).family(t, "go_goroutines", dto.MetricType_GAUGE)
	if fs["trueforge_pool_members"] != nil || fs["trueforge_budget_counters"] != nil {
		t.Errorf("store gauges served from a closed store: %v %v", fs["trueforge_pool_members"], fs["trueforge_budget_counters"])
	}
	if !strings.Contains(logged.String(), "serving /metrics") || !strings.Contains(logged.String(), "warm pool") {
		t.Errorf("the store's failure was not logged:\n%s", logged.String())
	}
}
