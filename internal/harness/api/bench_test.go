package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/telemetry"
)

// The harness as a service under load, and what HTTP adds to a turn.
//
// BenchmarkAPIConcurrentSessions200 is the API counterpart of the runner's
// BenchmarkConcurrentSessions100 (the CLI path): 200 clients at once, each creating a
// session, sending a message and following the event stream until run_finished; half
// the sessions only answer, half run one command in a real local sandbox. It reports
// errors (any non-2xx answer, a broken stream or a run that did not complete: must be
// 0), the turn latency from the message's POST to its run_finished (p50, p99),
// sessions per second and the sandboxes provisioned (100 expected).
//
// BenchmarkAPITurnScripted is the API counterpart of the runner's BenchmarkTurnScripted:
// the same scripted agent, ten text turns per session, one after the other from one
// keep-alive client. Its ms per turn less BenchmarkTurnScripted's is the HTTP path's own
// cost (auth, JSON, the run started off the request, the event stream).
//
// Neither uses the API tests' fixture: that one is built on *testing.T, with short
// polls and heartbeats that suit tests; these configure the server as serve does.

// benchAPI is an API server on a real loopback TCP listener, with one user.
type benchAPI struct {
	st    *store.Store
	env   *harnesstest.Env // nil without sandboxes
	srv   *api.Server
	ts    *httptest.Server
	token string
	// telemetry is what the runners trace with (tracing_bench_test.go).
	telemetry *telemetry.Provider
}

// newBenchAPI starts the API as serve does (its runner factory without policy or MCP,
// serve's HTTP server timeouts, the default poll and keep-alive intervals). With
// sandboxes, the store has a Ready local environment "default" on the real local
// runtime; without, no sandbox manager at all (as BenchmarkTurnScripted's runner).
func newBenchAPI(b *testing.B, sandboxes bool) *benchAPI {
	b.Helper()
	ba := &benchAPI{}
	var manager *lifecycle.Manager
	cfg := api.Config{}
	if sandboxes {
		ba.env = harnesstest.NewEnv(b)
		ba.st = ba.env.Store
		manager = lifecycle.New(lifecycle.Config{Store: ba.st, Runtimes: harnesstest.Source{C: ba.env.Runtime}})
		cfg.Runtimes = harnesstest.Source{C: ba.env.Runtime}
	} else {
		ba.st = harnesstest.NewStore(b)
		harnesstest.SeedNoSandbox(b, ba.st)
	}
	st := ba.st
	cfg.Store, cfg.Sandboxes = st, manager
	runners := harnesstest.Runners(st, manager)
	cfg.Runner = func(ctx context.Context, agent, user string) (*runner.Runner, error) {
		r, err := runners(ctx, agent, user)
		if r != nil {
			r.Telemetry = ba.telemetry // nil, untraced, unless the benchmark set it
		}
		return r, err
	}
	ba.srv = api.New(cfg)
	ba.ts = httptest.NewUnstartedServer(ba.srv)
	ba.ts.Config.ReadHeaderTimeout = 10 * time.Second
	ba.ts.Config.ReadTimeout = time.Minute
	ba.ts.Config.IdleTimeout = 2 * time.Minute
	ba.ts.Start()
	shutDownAtEnd(b, ba.srv, ba.ts)
	token, hash, err := api.NewToken()
	must(b, err)
	must(b, st.CreateUser(context.Background(), "bench", false, hash))
	ba.token = token
	return ba
}

// benchClient is one API client: its own transport, so its own keep-alive connections,
// as a browser's.
type benchClient struct {
	base, token string
	hc          *http.Client
}

func (ba *benchAPI) client() *benchClient {
	return &benchClient{base: ba.ts.URL + "/api/v1", token: ba.token, hc: &http.Client{Transport: &http.Transport{}}}
}

func (c *benchClient) close() { c.hc.CloseIdleConnections() }

// post sends a JSON body and decodes the 2xx answer's JSON into out; anything else is
// an error.
func (c *benchClient) post(ctx context.Context, path string, body, out any) error {
	b, _ := json.Marshal(body)
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	r.Header.Set("Authorization", "Bearer "+c.token)
	r.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &statusError{path: path, status: resp.StatusCode, body: data}
	}
	return json.Unmarshal(data, out)
}

// statusError is a non-2xx answer.
type statusError struct {
	path   string
	status int
	body   []byte
}

func (e *statusError) Error() string { return fmt.Sprintf("POST %s: %d %s", e.path, e.status, e.body) }

func (c *benchClient) newSession(ctx context.Context, agent string) (string, error) {
	var out struct{ ID string }
	if err := c.post(ctx, "/sessions", map[string]string{"agent": agent}, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

func (c *benchClient) send(ctx context.Context, sid, text string) (string, error) {
	var out struct {
		RunID string `json:"run_id"`
	}
	if err := c.post(ctx, "/sessions/"+sid+"/messages", map[string]string{"text": text}, &out); err != nil {
		return "", err
	}
	return out.RunID, nil
}

// eventStream is an open GET /sessions/{id}/events.
type eventStream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
}

func (c *benchClient) events(ctx context.Context, sid string) (*eventStream, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/sessions/"+sid+"/events", nil)
	if err != nil {
		return nil, err
	}
	r.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("GET events: %d %s", resp.StatusCode, data)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	return &eventStream{body: resp.Body, sc: sc}, nil
}

func (es *eventStream) close() { es.body.Close() }

// turnEnd is what a client saw of a turn on the stream.
type turnEnd struct {
	status      string // run_finished's
	runID       string
	toolResults int
	toolErrors  int
}

// untilFinished reads events up to the next run_finished.
func (es *eventStream) untilFinished() (turnEnd, error) {
	var end turnEnd
	var event, data string
	for es.sc.Scan() {
		line := es.sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "":
			switch event {
			case "tool_result":
				var p struct {
					IsError bool `json:"is_error"`
				}
				if err := json.Unmarshal([]byte(data), &p); err != nil {
					return end, fmt.Errorf("tool_result: %v: %s", err, data)
				}
				end.toolResults++
				if p.IsError {
					end.toolErrors++
				}
			case "run_finished":
				var p struct {
					RunID  string `json:"run_id"`
					Status string `json:"status"`
				}
				if err := json.Unmarshal([]byte(data), &p); err != nil {
					return end, fmt.Errorf("run_finished: %v: %s", err, data)
				}
				end.status, end.runID = p.Status, p.RunID
				return end, nil
			}
			event, data = "", ""
		}
	}
	if err := es.sc.Err(); err != nil {
		return end, err
	}
	return end, errors.New("the event stream ended before run_finished")
}

// percentile is the nearest-rank p-th percentile of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func BenchmarkAPIConcurrentSessions200(b *testing.B) {
	ba := newBenchAPI(b, true)
	addLoadAgents(b, ba)
	concurrentSessions200(b, ba)
}

// addLoadAgents adds the agents concurrentSessions200 talks to.
func addLoadAgents(b *testing.B, ba *benchAPI) {
	harnesstest.AddAgent(b, ba.st, "qa", "default", harnesstest.AgentSpec{
		"model": script(text("Paris.")), "sandbox": harnesstest.Sandbox("default", 15, 60, 120)})
	harnesstest.AddAgent(b, ba.st, "coder", "default", harnesstest.AgentSpec{
		"model": script(execCall("echo $GREETING from $(hostname)"), text("ran it")), "sandbox": harnesstest.Sandbox("default", 15, 60, 120)})
}

// concurrentSessions200 is BenchmarkAPIConcurrentSessions200 on ba, with its agents
// (tracing_bench_test.go runs it traced and untraced).
func concurrentSessions200(b *testing.B, ba *benchAPI) {
	const sessions = 200
	var (
		provisioned, failed atomic.Int64
		mu                  sync.Mutex
		latencies           []time.Duration
		elapsed             time.Duration
	)
	// one is a client's whole session; any failure is returned, never fatal, so that
	// every error is counted.
	one := func(ctx context.Context, c *benchClient, s int) (time.Duration, error) {
		agent := "qa"
		if s%2 == 1 {
			agent = "coder"
		}
		sid, err := c.newSession(ctx, agent)
		if err != nil {
			return 0, err
		}
		start := time.Now()
		runID, err := c.send(ctx, sid, "go")
		if err != nil {
			return 0, err
		}
		es, err := c.events(ctx, sid)
		if err != nil {
			return 0, err
		}
		defer es.close()
		end, err := es.untilFinished()
		lat := time.Since(start)
		switch {
		case err != nil:
			return 0, err
		case end.runID != runID || end.status != store.RunCompleted:
			return 0, fmt.Errorf("run_finished of run %s: %s; want run %s completed", end.runID, end.status, runID)
		case agent == "coder" && (end.toolResults != 1 || end.toolErrors != 0):
			return 0, fmt.Errorf("%d tool results, %d failed; want 1 that succeeded", end.toolResults, end.toolErrors)
		}
		return lat, nil
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		creates := ba.env.Runtime.Calls("Create")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		clients := make([]*benchClient, sessions)
		for s := range clients {
			clients[s] = ba.client()
		}
		// The clients start together: 200 sessions at once, not a ramp.
		gate := make(chan struct{})
		var wg sync.WaitGroup
		for s := 0; s < sessions; s++ {
			wg.Add(1)
			go func(s int) {
				defer wg.Done()
				<-gate
				lat, err := one(ctx, clients[s], s)
				if err != nil {
					failed.Add(1)
					b.Errorf("session %d: %v", s, err)
					return
				}
				mu.Lock()
				latencies = append(latencies, lat)
				mu.Unlock()
			}(s)
		}
		t0 := time.Now()
		close(gate)
		wg.Wait()
		elapsed += time.Since(t0)
		cancel()
		provisioned.Add(int64(ba.env.Runtime.Calls("Create") - creates))
		b.StopTimer()
		for _, c := range clients {
			c.close()
		}
		list, _ := ba.env.Runtime.Runtime.List(context.Background())
		for _, sb := range list {
			_ = ba.env.Runtime.Runtime.Delete(context.Background(), sb.ID)
		}
		b.StartTimer()
	}
	slices.Sort(latencies)
	b.ReportMetric(float64(failed.Load())/float64(b.N), "errors/op")
	b.ReportMetric(ms(percentile(latencies, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(latencies, 99)), "p99-ms")
	b.ReportMetric(float64(sessions*b.N)/elapsed.Seconds(), "sessions/s")
	b.ReportMetric(float64(provisioned.Load())/float64(b.N), "sandboxes/op")
}

// BenchmarkAPITurnScripted: one client keeps a session's event stream open, as the web
// page does, and sends its ten messages one after the other, each turn timed from the
// POST to its run_finished on the stream; a new session (and stream) every ten turns,
// as BenchmarkTurnScripted makes one.
func BenchmarkAPITurnScripted(b *testing.B) {
	ba := newBenchAPI(b, false)
	var turns []map[string]any
	for i := 0; i < 10; i++ {
		turns = append(turns, text(fmt.Sprintf("Answer %d: the capital of France is Paris.", i)))
	}
	harnesstest.AddAgent(b, ba.st, "bench", "default", harnesstest.AgentSpec{"model": script(turns...)})
	c := ba.client()
	defer c.close()
	ctx := context.Background()
	var es *eventStream
	defer func() {
		if es != nil {
			es.close()
		}
	}()
	var sid string
	// busy counts the messages answered 409 although the stream had already delivered
	// the previous turn's run_finished: the API's own contract says that ends the run,
	// so each is an API bug (a race in the server), retried here so that the figures
	// still come, and reported so that it is not hidden.
	busy := 0
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for i := 0; i < b.N; i++ {
		if i%10 == 0 {
			if es != nil {
				es.close()
			}
			var err error
			if sid, err = c.newSession(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
			if es, err = c.events(ctx, sid); err != nil {
				b.Fatal(err)
			}
		}
		runID, err := c.send(ctx, sid, "What is the capital of France?")
		for try := 0; try < 100 && isBusy(err); try++ {
			busy++
			time.Sleep(time.Millisecond)
			runID, err = c.send(ctx, sid, "What is the capital of France?")
		}
		if err != nil {
			b.Fatal(err)
		}
		end, err := es.untilFinished()
		if err != nil || end.runID != runID || end.status != store.RunCompleted {
			b.Fatalf("turn: %v, run %s %s; want run %s completed", err, end.runID, end.status, runID)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed())/float64(time.Millisecond)/float64(b.N), "ms/turn")
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/turn")
	b.ReportMetric(float64(busy), "busy-409s")
}

// processCPU is the CPU time this process (server and client) has used, user +
// system: on a shared machine a steadier measure of a turn's work than wall time. The
// runner's BenchmarkTurnScripted reports the same, for the CLI path.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func isBusy(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.status == http.StatusConflict
}

// BenchmarkAPITurnPaired is BenchmarkAPITurnScripted and the runner's
// BenchmarkTurnScripted (the CLI path: the runner called directly) in one process on one
// store, a turn of each in every iteration (which goes first alternates), each timed on
// its own. It reports each path's median turn and the median of the iterations'
// differences (added-p50-ms, the HTTP path's own cost): on a machine shared with other
// work both turns of a pair see the same load, which two benchmarks run minutes apart do
// not.
func BenchmarkAPITurnPaired(b *testing.B) {
	ba := newBenchAPI(b, false)
	var turns []map[string]any
	for i := 0; i < 10; i++ {
		turns = append(turns, text(fmt.Sprintf("Answer %d: the capital of France is Paris.", i)))
	}
	harnesstest.AddAgent(b, ba.st, "bench", "default", harnesstest.AgentSpec{"model": script(turns...)})
	ctx := context.Background()
	rn, err := harnesstest.Runners(ba.st, nil)(ctx, "bench", harnesstest.Owner)
	must(b, err)
	c := ba.client()
	defer c.close()
	var es *eventStream
	defer func() {
		if es != nil {
			es.close()
		}
	}()
	const prompt = "What is the capital of France?"
	var apiSid, cliSid string
	cliTurn := func() time.Duration {
		t0 := time.Now()
		out, err := rn.Run(ctx, cliSid, prompt, nil)
		if err != nil || out.Status != store.RunCompleted {
			b.Fatalf("CLI turn: %v %s", err, out.Status)
		}
		return time.Since(t0)
	}
	apiTurn := func() time.Duration {
		t0 := time.Now()
		runID, err := c.send(ctx, apiSid, prompt)
		if err != nil {
			b.Fatal(err)
		}
		end, err := es.untilFinished()
		if err != nil || end.runID != runID || end.status != store.RunCompleted {
			b.Fatalf("API turn: %v, run %s %s; want run %s completed", err, end.runID, end.status, runID)
		}
		return time.Since(t0)
	}
	cli, api, added := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%10 == 0 {
			if es != nil {
				es.close()
			}
			if apiSid, err = c.newSession(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
			if es, err = c.events(ctx, apiSid); err != nil {
				b.Fatal(err)
			}
			if cliSid, err = rn.NewSession(ctx, harnesstest.Owner); err != nil {
				b.Fatal(err)
			}
		}
		var x, y time.Duration
		if i%2 == 0 {
			x = cliTurn()
			y = apiTurn()
		} else {
			y = apiTurn()
			x = cliTurn()
		}
		cli, api, added = append(cli, x), append(api, y), append(added, y-x)
	}
	b.StopTimer()
	for _, d := range [][]time.Duration{cli, api, added} {
		slices.Sort(d)
	}
	b.ReportMetric(ms(percentile(cli, 50)), "cli-p50-ms")
	b.ReportMetric(ms(percentile(api, 50)), "api-p50-ms")
	b.ReportMetric(ms(percentile(added, 50)), "added-p50-ms")
}
