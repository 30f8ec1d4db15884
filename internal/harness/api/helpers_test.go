package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/attachments"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func TestMain(m *testing.M) {
	backends.ReexecMain() // the local backend re-executes this test binary as its helpers
	pgtest.Main(m)
}

// fixture is an API server on loopback over a real store, with users alice, bob (plain)
// and root (admin) and their tokens.
type fixture struct {
	t       *testing.T
	st      *store.Store
	env     *harnesstest.Env // nil without sandboxes
	manager *lifecycle.Manager
	srv     *api.Server
	ts      *httptest.Server
	clock   *harnesstest.Clock // the server's clock
	tokens  map[string]string
	// heartbeat is the runners' heartbeat interval (a cancel asked through the row is
	// seen at the next one).
	heartbeat time.Duration
	// attach keeps the sessions' attachments (in the store).
	attach *attachments.Service
}

type fixtureOpts struct {
	sandboxes bool // a real local sandbox provider and its Ready "default" environment
	st        *store.Store
	cfg       func(*api.Config)
	noUsers   bool // the users are in the store already (another replica's fixture)
}

// shutDownAtEnd shuts srv down when the test ends (its runs cancelled and waited for,
// for 30s at most), then closes ts, which serves it.
func shutDownAtEnd(tb testing.TB, srv *api.Server, ts *httptest.Server) {
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			tb.Errorf("shutting the API down: %v", err)
		}
		ts.Close()
	})
}

func newFixture(t *testing.T, o fixtureOpts) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: harnesstest.NewClock(), tokens: map[string]string{}, heartbeat: 50 * time.Millisecond}
	switch {
	case o.sandboxes:
		f.env = harnesstest.NewEnv(t)
		f.st = f.env.Store
		f.manager = lifecycle.New(lifecycle.Config{Store: f.st, Runtimes: harnesstest.Source{C: f.env.Runtime}})
	case o.st != nil:
		f.st = o.st
	default:
		f.st = harnesstest.NewStore(t)
		harnesstest.SeedNoSandbox(t, f.st)
	}
	cfg := f.config()
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	f.srv = api.New(cfg)
	f.ts = httptest.NewServer(f.srv)
	shutDownAtEnd(t, f.srv, f.ts)
	if !o.noUsers {
		for name, admin := range map[string]bool{"alice": false, "bob": false, "root": true} {
			f.addUser(name, admin)
		}
	}
	return f
}

// config is the server's configuration over the fixture's store, manager and clock.
func (f *fixture) config() api.Config {
	if f.attach == nil {
		f.attach = &attachments.Service{Store: f.st}
	}
	cfg := api.Config{Store: f.st, Sandboxes: f.manager, Now: f.clock.Now, PollInterval: 40 * time.Millisecond,
		Runner: f.runner, Attachments: f.attach}
	if f.env != nil {
		cfg.Runtimes = harnesstest.Source{C: f.env.Runtime}
	}
	return cfg
}

// runner builds agent's runner as serve does, with the fixture's sandboxes; an agent
// whose name starts with "stream" gets its text streamed in pieces.
func (f *fixture) runner(ctx context.Context, agent, user string) (*runner.Runner, error) {
	a, err := agents.Load(ctx, f.st, agent)
	if err != nil {
		return nil, err
	}
	m, err := a.NewModel(agents.ModelOptions{})
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(agent, "stream") {
		m = chunked{m}
	}
	x := &tools.Executor{Store: f.st, Sandboxes: f.manager, Attachments: f.attach}
	return &runner.Runner{Store: f.st, Agent: a, Model: m, Tools: x, HeartbeatEvery: f.heartbeat}, nil
}

// chunked streams a model's text in pieces of 4 bytes, 20 ms apart.
type chunked struct{ m model.Model }

func (c chunked) Name() string { return c.m.Name() }

func (c chunked) Generate(ctx context.Context, req model.Request, onText func(string)) (model.Response, error) {
	resp, err := c.m.Generate(ctx, req, nil)
	if err != nil {
		return resp, err
	}
	for i := 0; i < len(resp.Text); i += 4 {
		select {
		case <-ctx.Done():
			return resp, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if onText != nil {
			onText(resp.Text[i:min(i+4, len(resp.Text))])
		}
	}
	return resp, nil
}

func (f *fixture) addUser(name string, admin bool) {
	f.t.Helper()
	token, hash, err := api.NewToken()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.st.CreateUser(context.Background(), name, admin, hash); err != nil {
		f.t.Fatal(err)
	}
	f.tokens[name] = token
}

// seedNoSandbox stores a provider and a (not built) environment "default": enough for
// agents without a sandbox.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// response is an answer, its body read.
type response struct {
	*http.Response
	body []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("%s: body is not JSON: %v\n%s", r.Request.URL, err, r.body)
	}
	return m
}

// errCode is the error code of an error answer ("" when it is none).
func (r response) errCode() string {
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

// errMessage is the message of an error answer.
func (r response) errMessage() string {
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Message
}

// req makes a request as user ("" for none) with a JSON body (nil for none).
func (f *fixture) req(method, path, user string, body any) response {
	f.t.Helper()
	var rd io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			b, _ = json.Marshal(body)
		}
		rd = bytes.NewReader(b)
	}
	r, err := http.NewRequest(method, f.ts.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		r.Header.Set("Authorization", "Bearer "+f.tokens[user])
	}
	return f.do(r)
}

func (f *fixture) do(r *http.Request) response {
	f.t.Helper()
	resp, err := f.ts.Client().Do(r)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return response{resp, b}
}

// want fails unless r has status (and, when code is set, that error code).
func want(t testing.TB, what string, r response, status int, code string) {
	t.Helper()
	if r.StatusCode != status || (code != "" && r.errCode() != code) {
		t.Fatalf("%s: %d %s; want %d %s", what, r.StatusCode, r.body, status, code)
	}
}

// newSession creates a session of agent for user and returns its id.
func (f *fixture) newSession(user, agent string) string {
	f.t.Helper()
	r := f.req("POST", "/api/v1/sessions", user, map[string]any{"agent": agent})
	want(f.t, "create session", r, http.StatusCreated, "")
	return r.json(f.t)["id"].(string)
}

// send posts a message and returns its run id.
func (f *fixture) send(user, sid, text string) string {
	f.t.Helper()
	r := f.req("POST", "/api/v1/sessions/"+sid+"/messages", user, map[string]any{"text": text})
	want(f.t, "send message", r, http.StatusAccepted, "")
	return r.json(f.t)["run_id"].(string)
}

// waitIdle waits until the session has no running run.
func (f *fixture) waitIdle(sid string) {
	f.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := f.st.RunningRun(context.Background(), sid)
		if err != nil {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("session %s still running after a minute", sid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// turn sends a message and waits for its run to finish.
func (f *fixture) turn(user, sid, text string) {
	f.t.Helper()
	f.send(user, sid, text)
	f.waitIdle(sid)
}

// sse is one Server-Sent Event.
type sse struct {
	id    string
	event string
	data  string
}

func (e sse) seq() int64 { n, _ := strconv.ParseInt(e.id, 10, 64); return n }

// stream opens the session's event stream as user, with Last-Event-ID lastID ("" for
// none), and returns its events as they come; cancel closes it.
func (f *fixture) stream(user, sid, lastID string) (<-chan sse, context.CancelFunc) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, _ := http.NewRequestWithContext(ctx, "GET", f.ts.URL+"/api/v1/sessions/"+sid+"/events", nil)
	r.Header.Set("Authorization", "Bearer "+f.tokens[user])
	if lastID != "" {
		r.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := f.ts.Client().Do(r)
	if err != nil {
		cancel()
		f.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		f.t.Fatalf("event stream: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	ch := make(chan sse, 1024)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		readSSE(resp.Body, ch)
	}()
	return ch, cancel
}

// readSSE parses an event stream into ch (comments are dropped; a keep-alive comes as an
// event named "keep-alive").
func readSSE(r io.Reader, ch chan<- sse) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	var cur sse
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.event != "" || len(data) > 0 {
				cur.data = strings.Join(data, "\n")
				ch <- cur
			}
			cur, data = sse{}, nil
		case strings.HasPrefix(line, ":"):
			ch <- sse{event: "keep-alive"}
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
}

// until reads events from ch until one satisfies stop (included), or times out.
func until(t testing.TB, ch <-chan sse, limit time.Duration, stop func(sse) bool) []sse {
	t.Helper()
	var out []sse
	timeout := time.After(limit)
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended after %d events: %v", len(out), kindsOf(out))
			}
			out = append(out, e)
			if stop(e) {
				return out
			}
		case <-timeout:
			t.Fatalf("no stop event within %s; got %v", limit, kindsOf(out))
		}
	}
}

func runFinished(e sse) bool { return e.event == "run_finished" }

func kindsOf(evs []sse) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s#%s", e.event, e.id))
	}
	return out
}

// committed keeps the events with an id (the log's), dropping deltas and keep-alives.
func committed(evs []sse) []sse {
	var out []sse
	for _, e := range evs {
		if e.id != "" {
			out = append(out, e)
		}
	}
	return out
}

// logSeqs is the session's log in the store, as seq -> kind.
func (f *fixture) logKinds(sid string) []string {
	f.t.Helper()
	evs, err := f.st.Events(context.Background(), sid, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s#%d", e.Kind, e.Seq))
	}
	return out
}

func script(turns ...map[string]any) map[string]any { return harnesstest.Script(turns...) }

func text(s string) map[string]any { return map[string]any{"text": s} }

func call(name string, args map[string]any) map[string]any {
	return map[string]any{"tool_calls": []any{map[string]any{"name": name, "arguments": args}}}
}

func execCall(cmd string) map[string]any { return call("exec", map[string]any{"command": cmd}) }
