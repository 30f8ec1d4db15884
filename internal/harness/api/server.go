// Package api is the harness as a service: the HTTP API that `trueforge-harness serve`
// serves, for the people agents work for and for the web page (package api/web).
//
// Every call under /api/v1 is made as a user (store.User): with `Authorization: Bearer
// <token>`, or with the cookie of a login the web page made with that token (auth.go;
// state-changing requests on a cookie carry a CSRF header). A user sees and changes only
// its own sessions: another user's session, its sandbox and its files are answered 404,
// exactly as one that does not exist, and a session id is never authorization. Admins
// also list every session and delete any (recorded in the audit log, admin.go).
//
// A message starts a run in this process, not tied to the request (sessions.go); the
// events endpoint streams the session's log as Server-Sent Events that resume exactly
// after Last-Event-ID, plus the running model step's text as it streams (events.go).
// Downloads serve offered files with their digest and provenance (files.go). Errors are
// {"error": {"code", "message"}} (errors.go). GET /metrics is Prometheus text
// (metrics.go); GET /api/v1/openapi.json documents every route (openapi.go).
//
// Replicas: nothing a request needs lives only in one process. Users, logins and
// sessions are in the store; a replica streams the events another replica's run
// commits (the store's event feed: LISTEN/NOTIFY on PostgreSQL, with a slow poll as a
// safety net); a cancel for a run another replica runs is recorded on
// the run row, which that replica's heartbeat reads.
package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/attachments"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sessions"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Defaults of Config.
const (
	DefaultLoginTTL     = 12 * time.Hour
	DefaultMaxBodyBytes = 1 << 20
	DefaultPollInterval = 500 * time.Millisecond
	// DefaultSharedPollInterval is PollInterval's default on PostgreSQL, where the
	// store's event feed (LISTEN/NOTIFY) brings every replica's events: the poll is only
	// the safety net for notifications lost while the listening connection was down.
	DefaultSharedPollInterval = 5 * time.Second
	DefaultKeepAlive          = 15 * time.Second
)

// Config configures a Server.
type Config struct {
	Store *store.Store
	// Sandboxes is the sandbox lifecycle manager: a session's delete deletes its
	// sandbox through it.
	Sandboxes *lifecycle.Manager
	// Runtimes opens sandbox providers' runtimes, for reading workspace files (never
	// provisioning or resuming a sandbox).
	Runtimes lifecycle.RuntimeSource
	// Runner builds the runner of agent for user, as the CLI does (Code Mode, the MCP
	// toolset calling servers for user, the operator's policy). It is called for each
	// message, so an agent applied again is run as it is now.
	Runner func(ctx context.Context, agent, user string) (*runner.Runner, error)
	Logger *slog.Logger
	// Now is the clock (login expiry, offers' expiry); nil means time.Now.
	Now func() time.Time
	// Web serves everything outside /api/, /healthz and /metrics (the web page); nil
	// serves a placeholder page.
	Web http.Handler
	// TraceURL links each turn on the web page to its trace: a URL of the operator's
	// tracing backend with {trace_id} where the turn's trace id goes (CheckTraceURL);
	// "" shows no link.
	TraceURL string
	// MetricsPublic serves /metrics without a token; otherwise it needs an admin's.
	MetricsPublic bool
	// SecureCookies marks the login cookie Secure even on a request that came over plain
	// HTTP: for a server behind a reverse proxy that terminates TLS. A request over TLS
	// always gets a Secure cookie.
	SecureCookies bool
	// LoginTTL is how long a login lasts without a request (sliding); 0 means
	// DefaultLoginTTL (12 h).
	LoginTTL time.Duration
	// MaxBodyBytes caps a request's body; 0 means DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64
	// PollInterval is how often an idle event stream reads the store anyway, as a
	// safety net: the store's event feed wakes it for every event this process appends
	// and, on PostgreSQL, every event another replica appends (LISTEN/NOTIFY); what the
	// feed does not see is another process writing the same SQLite file (the CLI), and
	// notifications lost while the listening connection was down. 0 means
	// DefaultPollInterval (500 ms) on SQLite, DefaultSharedPollInterval (5 s) on
	// PostgreSQL.
	PollInterval time.Duration
	// Budgets lists the cumulative budgets the operator's policy declares, to show
	// their limits beside what was charged (GET /api/v1/budgets); nil shows usage only.
	Budgets func() []policy.Budget
	// KeepAlive is the interval of an event stream's keep-alive comments; 0 means
	// DefaultKeepAlive (15 s).
	KeepAlive time.Duration
	// Scanner scans every file before its first download, once per digest
	// (sessions.CheckScan); nil scans nothing. ScannerFailOpen lets a download go on,
	// unscanned and logged, when the scanner gives no verdict; otherwise it is refused
	// (503 scanner_unavailable).
	Scanner         sessions.Scanner
	ScannerFailOpen bool
	// AllowExecutables hands out executables and archives that hold them, which are
	// otherwise refused (403 executable): executable outputs go through the
	// operator's build and signing pipeline.
	AllowExecutables bool
	// Policy is the operator's policy, read for who may download each classification
	// of offered files (policy.DownloadRecipients); nil, or a nil *Policy, keeps the
	// defaults. An error refuses downloads that need the policy (it is not guessed).
	Policy func() (*policy.Policy, error)
	// Attachments keeps the files users attach to their sessions; nil refuses
	// attachments (501).
	Attachments *attachments.Service
}

// Server is the HTTP API. It is an http.Handler; Shutdown cancels the runs it started.
type Server struct {
	cfg     Config
	log     *slog.Logger
	mux     *http.ServeMux
	routes  []route
	metrics *metrics

	// runCtx is the parent of every run this server starts; Shutdown cancels it.
	runCtx   context.Context
	stopRuns context.CancelFunc
	wg       sync.WaitGroup

	mu      sync.Mutex
	closing bool
	runs    map[string]*liveRun // by session id
	hubs    map[string]*hub     // by session id

	// types keeps what downloaded contents are, by digest (checkType).
	types sessions.TypeChecks
	// owner is this process's name in run rows (lifecycle.ProcessOwner), for the runs
	// whose runner names none.
	owner string
}

// liveRun is a run this process runs.
type liveRun struct {
	id     string
	cancel context.CancelFunc
	done   chan struct{}
	// finished: its run_finished is committed; only the bookkeeping after it is left,
	// so a client that saw run_finished and sends the next message at once waits for
	// that (milliseconds) instead of being told the session is busy.
	finished atomic.Bool
	// started: its run row and user message are committed.
	started atomic.Bool
}

// finishWait bounds how long a request waits for a finished run's bookkeeping.
const finishWait = 5 * time.Second

// liveRun is the run this process runs in a session, nil when none runs: a run whose
// run_finished is committed is waited for, so it counts as over.
func (s *Server) liveRun(sessionID string) *liveRun {
	for {
		s.mu.Lock()
		lr := s.runs[sessionID]
		s.mu.Unlock()
		if lr == nil {
			return nil
		}
		if !lr.finished.Load() && !s.endedInStore(sessionID, lr) {
			return lr
		}
		select {
		case <-lr.done:
		case <-time.After(finishWait):
			return lr
		}
	}
}

// endedInStore reports whether lr, which started, is no longer the session's running
// run in the store. The store is where a stream reads run_finished, and the run commits
// it before this process hears of it (emit runs after the commit): a client that read it
// from the store and sends the next message at once must not be told the session is busy.
func (s *Server) endedInStore(sessionID string, lr *liveRun) bool {
	if !lr.started.Load() {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), finishWait)
	defer cancel()
	run, err := s.cfg.Store.RunningRun(ctx, sessionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return true
	case err != nil:
		return false
	}
	return run.ID != lr.id
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LoginTTL <= 0 {
		cfg.LoginTTL = DefaultLoginTTL
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
		if cfg.Store != nil && cfg.Store.Shared() {
			cfg.PollInterval = DefaultSharedPollInterval
		}
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(),
		runs: map[string]*liveRun{}, hubs: map[string]*hub{}, owner: lifecycle.ProcessOwner()}
	s.metrics = newMetrics(cfg.Logger, s.LiveRuns, newStoreGauges(cfg.Store, cfg.Budgets)) // metrics.go
	s.runCtx, s.stopRuns = context.WithCancel(context.Background())
	s.routes = s.table()
	s.register()
	return s
}

// ServeHTTP serves the API, /healthz, /metrics and the web page.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	s.mux.ServeHTTP(w, r)
}

// route is one endpoint: what the mux serves, the OpenAPI document describes and the
// metrics label requests by.
type route struct {
	method  string
	pattern string // the path, with {name} wildcards as net/http spells them
	auth    authKind
	handle  func(w http.ResponseWriter, r *http.Request, c *caller) error
}

// Route is a method and path the API serves (for the OpenAPI check and the docs).
type Route struct{ Method, Path string }

// Routes lists the API's routes (the web page's "/" is not one).
func (s *Server) Routes() []Route {
	out := make([]Route, len(s.routes))
	for i, rt := range s.routes {
		out[i] = Route{Method: rt.method, Path: rt.pattern}
	}
	return out
}

// table is every route of the API.
func (s *Server) table() []route {
	return []route{
		{http.MethodGet, "/healthz", authNone, s.healthz},
		{http.MethodGet, "/metrics", authMetrics, s.serveMetrics},
		{http.MethodGet, "/api/v1/openapi.json", authNone, s.openapi},
		{http.MethodPost, "/api/v1/login", authNone, s.login},
		{http.MethodPost, "/api/v1/logout", authUser, s.logout},
		{http.MethodGet, "/api/v1/me", authUser, s.me},
		{http.MethodGet, "/api/v1/agents", authUser, s.listAgents},
		{http.MethodGet, "/api/v1/environments", authUser, s.listEnvironments},
		{http.MethodGet, "/api/v1/environments/overview", authUser, s.environmentsOverview},
		{http.MethodPost, "/api/v1/sessions", authUser, s.createSession},
		{http.MethodGet, "/api/v1/sessions", authUser, s.listSessions},
		{http.MethodGet, "/api/v1/sessions/{id}", authSession, s.own(s.getSession)},
		{http.MethodDelete, "/api/v1/sessions/{id}", authUser, s.deleteSession},
		{http.MethodPost, "/api/v1/sessions/{id}/messages", authSession, s.own(s.postMessage)},
		{http.MethodGet, "/api/v1/sessions/{id}/events", authSession, s.own(s.streamEvents)},
		{http.MethodPost, "/api/v1/sessions/{id}/cancel", authSession, s.own(s.cancelRun)},
		{http.MethodPost, "/api/v1/sessions/{id}/attachments", authSession, s.own(s.postAttachment)},
		{http.MethodGet, "/api/v1/sessions/{id}/attachments", authSession, s.own(s.listAttachments)},
		{http.MethodGet, "/api/v1/sessions/{id}/attachments/{att}", authSession, s.own(s.getAttachment)},
		{http.MethodDelete, "/api/v1/sessions/{id}/attachments/{att}", authSession, s.own(s.deleteAttachment)},
		{http.MethodGet, "/api/v1/sessions/{id}/files", authUser, s.listFiles},
		{http.MethodGet, "/api/v1/sessions/{id}/files/{path...}", authUser, s.getFile},
		{http.MethodPost, "/api/v1/sessions/{id}/files/{path...}", authUser, s.releaseFile}, // .../files/{path}/release
		{http.MethodGet, "/api/v1/approvals", authUser, s.listApprovals},
		{http.MethodGet, "/api/v1/approvals/{id}", authUser, s.getApproval},
		{http.MethodPost, "/api/v1/approvals/{id}", authUser, s.decideApproval},
		{http.MethodGet, "/api/v1/budgets", authUser, s.listBudgets},
		{http.MethodGet, "/api/v1/usage", authUser, s.usage},
		{http.MethodGet, "/api/v1/admin/audit", authAdmin, s.auditLog},
	}
}

// register puts the routes on the mux: each behind its authentication and the request
// metrics, each path answering other methods with a JSON 405, anything else under /api/
// with a JSON 404, and the rest to the web page.
func (s *Server) register() {
	allow := map[string][]string{}
	var paths []string
	for _, rt := range s.routes {
		if _, ok := allow[rt.pattern]; !ok {
			paths = append(paths, rt.pattern)
		}
		allow[rt.pattern] = append(allow[rt.pattern], rt.method)
		s.mux.Handle(rt.method+" "+rt.pattern, s.wrap(rt))
	}
	for _, p := range paths {
		methods := allow[p]
		if slicesContain(methods, http.MethodGet) {
			methods = append(methods, http.MethodHead)
		}
		pattern := p
		s.mux.Handle(p, s.instrument(pattern, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", strings.Join(methods, ", "))
			s.writeError(w, r, errorf(http.StatusMethodNotAllowed, CodeMethod, "%s is not allowed on %s; use %s", r.Method, pattern, strings.Join(methods, ", ")))
		}))
	}
	s.mux.Handle("/api/", s.instrument("/api/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, errorf(http.StatusNotFound, CodeNotFound, "no API route %s %s; GET /api/v1/openapi.json lists them", r.Method, r.URL.Path))
	}))
	web := s.cfg.Web
	if web == nil {
		web = placeholder{}
	}
	s.mux.Handle("/", web)
}

// wrap is a route's handler: authentication, then the route, errors answered as JSON.
func (s *Server) wrap(rt route) http.Handler {
	return s.instrument(rt.pattern, func(w http.ResponseWriter, r *http.Request) {
		c, err := s.authenticate(r, rt.auth)
		if err == nil {
			err = rt.handle(w, r, c)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	})
}

// instrument counts requests by route and status.
func (s *Server) instrument(pattern string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		h(rec, r)
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		s.metrics.request(pattern, r.Method, status)
	})
}

// statusRecorder remembers the status a handler answered with; it passes flushing
// through (Unwrap), which the event stream needs.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// healthz checks the store: 200 {"status": "ok"}, else 503.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request, _ *caller) error {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if _, err := s.cfg.Store.SchemaVersion(ctx); err != nil {
		s.log.Warn("health check: the store does not answer", "err", err)
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "the control-plane database does not answer")
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// Shutdown cancels the runs this server started (each is recorded as cancelled) and
// waits for them to end, or for ctx. New messages are refused from the start.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.stopRuns()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return errors.Join(errors.New("runs still ending"), ctx.Err())
	}
}

// LiveRuns is how many runs this server is running.
func (s *Server) LiveRuns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.runs)
}

func slicesContain(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
