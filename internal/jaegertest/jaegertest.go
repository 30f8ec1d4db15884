// Package jaegertest gives tests a real trace collector: Jaeger v2 (the all-in-one
// binary, an OpenTelemetry Collector distribution) with an OTLP/HTTP receiver, in-memory
// storage and its query API, on loopback ports of its own for each Start. Tests export
// to it as the harness does in production and read back what it stored.
//
// The binary is found at TRUEFORGE_JAEGER, else in the tool cache where
// scripts/ensure-jaeger.sh builds it from the Go module proxy. Without it the tests that
// need it are skipped, unless TRUEFORGE_REQUIRE_JAEGER=1 (set by scripts/test.sh, which
// builds it), where they fail.
package jaegertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/testpeer"
)

// Version is the Jaeger release scripts/ensure-jaeger.sh builds; the lookup in the tool
// cache is for it.
const Version = "v1.75.0"

// Env names the jaeger binary to use instead of the tool cache's.
const Env = "TRUEFORGE_JAEGER"

// RequireEnv, set to 1, makes a missing binary a failure instead of a skip.
const RequireEnv = "TRUEFORGE_REQUIRE_JAEGER"

// readyTimeout bounds the wait for Jaeger to listen (about a second, usually).
const readyTimeout = 30 * time.Second

// config is Jaeger's configuration: OTLP over HTTP in, memory storage, the query API;
// nothing else listens (no gRPC receiver, no Prometheus endpoint of its own metrics), and
// the query service does not trace itself (it would export to localhost:4317).
const config = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    enable_tracing: false
    storage:
      traces: memstore
    http:
      endpoint: %s
    grpc:
      endpoint: %s
receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// Jaeger is a running Jaeger.
type Jaeger struct {
	// OTLP is the OTLP/HTTP traces URL (http://127.0.0.1:PORT/v1/traces).
	OTLP string
	// Endpoint is the OTLP/HTTP base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it.
	Endpoint string
	// Query is the query API's base URL (http://127.0.0.1:PORT).
	Query string
}

// Start starts a Jaeger for tb, killed when tb ends. It skips tb when there is no
// binary, or fails it: under TRUEFORGE_REQUIRE_JAEGER=1, or when TRUEFORGE_JAEGER names
// a file that is not there.
func Start(tb testing.TB) *Jaeger {
	tb.Helper()
	bin, err := find()
	if err != nil {
		testpeer.Missing(tb, testpeer.Peer{Name: "jaeger", Env: Env, RequireEnv: RequireEnv,
			HowTo: "build it with scripts/ensure-jaeger.sh, or set " + Env + " to its binary"}, err)
	}
	// Free ports, chosen by the kernel and released for Jaeger: another process may take
	// one meanwhile, so a start that fails is tried again with new ones.
	var last string
	for range 3 {
		j, out, err := start(tb, bin)
		if err == nil {
			return j
		}
		last = fmt.Sprintf("%v; its output:\n%s", err, out)
	}
	tb.Fatalf("jaeger did not start: %s", last)
	return nil
}

func start(tb testing.TB, bin string) (*Jaeger, string, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, "", err
	}
	dir := tb.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	query, grpc, otlp := ports[0], ports[1], ports[2]
	if err := os.WriteFile(cfg, fmt.Appendf(nil, config, query, grpc, otlp), 0o600); err != nil {
		return nil, "", err
	}
	out := &testpeer.Output{}
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("starting %s: %w", bin, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	stop := func() {
		select {
		case <-exited:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		<-exited
	}
	j := &Jaeger{Endpoint: "http://" + otlp, OTLP: "http://" + otlp + "/v1/traces", Query: "http://" + query}
	deadline := time.Now().Add(readyTimeout)
	for {
		if ready(j) {
			break
		}
		select {
		case <-exited:
			return nil, out.String(), fmt.Errorf("jaeger exited before it listened: %v", waitErr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, out.String(), fmt.Errorf("jaeger did not listen within %v", readyTimeout)
		}
	}
	tb.Cleanup(func() {
		stop()
		if tb.Failed() {
			tb.Logf("jaeger's output:\n%s", out.String())
		}
	})
	return j, "", nil
}

// ready says both the query API answers and the OTLP receiver accepts connections.
func ready(j *Jaeger) bool {
	resp, err := http.Get(j.Query + "/api/services")
	if err != nil {
		return false
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	c, err := net.DialTimeout("tcp", j.Endpoint[len("http://"):], time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func freePorts(n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// Trace is a trace as Jaeger's query API (/api/traces/{id}) returns it.
type Trace struct {
	TraceID   string             `json:"traceID"`
	Spans     []Span             `json:"spans"`
	Processes map[string]Process `json:"processes"`
}

// Span is one span of a Trace.
type Span struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []Reference `json:"references"`
	Tags          []KeyValue  `json:"tags"`
	Logs          []Log       `json:"logs"`
	ProcessID     string      `json:"processID"`
}

// Reference links a span to its parent (refType CHILD_OF).
type Reference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// KeyValue is a tag (attribute) or a log (event) field.
type KeyValue struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Log is a span event.
type Log struct {
	Timestamp int64      `json:"timestamp"`
	Fields    []KeyValue `json:"fields"`
}

// Process is the exporting service (its resource).
type Process struct {
	ServiceName string     `json:"serviceName"`
	Tags        []KeyValue `json:"tags"`
}

// Parent is the span's parent's id, "" for a root.
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Tag is the value of attribute key and whether the span has it.
func (s Span) Tag(key string) (any, bool) {
	for _, kv := range s.Tags {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return nil, false
}

// Get fetches trace id, waiting until it holds at least minSpans spans (exporters batch,
// and Jaeger stores what it received asynchronously). It returns the trace and the raw
// JSON the query API answered with.
func (j *Jaeger) Get(ctx context.Context, id string, minSpans int) (Trace, []byte, error) {
	var last error
	for {
		t, raw, err := j.get(ctx, id)
		if err == nil && len(t.Spans) >= minSpans {
			return t, raw, nil
		}
		if err == nil {
			err = fmt.Errorf("trace %s has %d spans, want at least %d", id, len(t.Spans), minSpans)
		}
		last = err
		select {
		case <-ctx.Done():
			return t, raw, fmt.Errorf("%w (%v)", last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (j *Jaeger) get(ctx context.Context, id string) (Trace, []byte, error) {
	traces, raw, err := j.search(ctx, j.Query+"/api/traces/"+id)
	if err != nil {
		return Trace{}, raw, err
	}
	if len(traces) != 1 {
		return Trace{}, raw, fmt.Errorf("GET /api/traces/%s: %d traces", id, len(traces))
	}
	return traces[0], raw, nil
}

// Find searches service's traces for those with a span named operation whose tags
// include tags (Jaeger's /api/traces search), waiting until there is at least one. It
// returns them and the raw JSON the query API answered with.
func (j *Jaeger) Find(ctx context.Context, service, operation string, tags map[string]string) ([]Trace, []byte, error) {
	tagJSON, err := json.Marshal(tags)
	if err != nil {
		return nil, nil, err
	}
	q := url.Values{"service": {service}, "operation": {operation}, "tags": {string(tagJSON)}, "lookback": {"1h"}, "limit": {"20"}}
	u := j.Query + "/api/traces?" + q.Encode()
	var last error
	for {
		traces, raw, err := j.search(ctx, u)
		if err == nil && len(traces) > 0 {
			return traces, raw, nil
		}
		if err == nil {
			err = fmt.Errorf("no trace of %s with a span %q tagged %s", service, operation, tagJSON)
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, raw, fmt.Errorf("%w (%v)", last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// search GETs u, a query API URL answering {"data": [traces]}.
func (j *Jaeger) search(ctx context.Context, u string) ([]Trace, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, raw, fmt.Errorf("GET %s: %s: %s", u, resp.Status, bytes.TrimSpace(raw))
	}
	var body struct {
		Data []Trace `json:"data"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, raw, fmt.Errorf("GET %s: %w", u, err)
	}
	return body.Data, raw, nil
}

// find returns the jaeger binary's path, or why there is none.
func find() (string, error) {
	bin := os.Getenv(Env)
	if bin == "" {
		cache := os.Getenv("TRUEFORGE_TOOLS_DIR")
		if cache == "" {
			// As scripts/toolcache.sh has it (not os.UserCacheDir, which differs off Linux).
			base := os.Getenv("XDG_CACHE_HOME")
			if base == "" {
				home, err := os.UserHomeDir()
				if err != nil {
					return "", fmt.Errorf("no tool cache: %w", err)
				}
				base = filepath.Join(home, ".cache")
			}
			cache = filepath.Join(base, "trueforge-tools")
		}
		bin = filepath.Join(cache, "jaeger-"+Version, "jaeger")
	}
	if _, err := os.Stat(bin); err != nil {
		return "", err
	}
	return bin, nil
}
