// Package daytonatest is an in-process emulator of the Daytona REST API for tests: an
// httptest.Server with the documented snapshot and sandbox state machines, paging, API-key
// permissions, secrets that never return values, fault injection and per-route request
// counters.
//
// The API is served under URL() (like https://app.daytona.io/api); each sandbox's toolbox
// under {server}/toolbox/{sandboxId}, with session commands (/process/session, see
// sessions.go) as the v0.190 daemon runs them. When bubblewrap is installed, every sandbox is a real
// local sandbox (internal/sandbox/local, on a release snapshot of the host prepared on the
// first sandbox): toolbox commands run confined in it, networkBlockAll gives it no network,
// and file calls work on its /workspace (other absolute paths get 400). Without
// bubblewrap (or with WithHostProcesses) commands run with /bin/sh on the host in a
// per-sandbox directory, with absolute paths mapped into it; that fallback confines
// nothing. Either way domainAllowList is validated and stored but not enforced, and
// /process/execute returns stdout followed by stderr.
//
// The emulator is stricter than Daytona in one deliberate way: a request body with a
// property its DTO does not declare is refused ("property X should not exist"), which
// v0.190's API does not do (its ValidationPipe has no forbidNonWhitelisted,
// apps/api/src/main.ts:72-76; it ignores the property). That catches our own field
// typos, which Daytona would drop silently; see decodeStrict.
//
// State changes are computed lazily from elapsed time on every request, so there are no
// background goroutines but those running session commands. Daytona's auto-stop,
// auto-archive and auto-delete crons run only when a test moves the emulator's clock
// (Advance, clock.go), so they happen when the test says and never in between.
package daytonatest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// AllPermissions are the v0.205 API-key permission strings.
var AllPermissions = []string{
	"write:registries", "delete:registries", "write:snapshots", "delete:snapshots",
	"write:sandboxes", "delete:sandboxes", "read:volumes", "write:volumes", "delete:volumes",
	"write:regions", "delete:regions", "read:runners", "write:runners", "delete:runners",
	"read:audit_logs", "manage:api_keys", "manage:secrets", "read:limits", "manage:sso",
	"read:billing", "manage:billing",
}

// DefaultKey is the API key NewServer registers with AllPermissions.
const DefaultKey = "dtn_test_default"

// DefaultFailMarker makes a snapshot build fail when its Dockerfile (or the base64 build
// script inside it) contains it.
const DefaultFailMarker = "daytonatest:fail-build"

// Server is the emulator.
type Server struct {
	ts   *httptest.Server
	root string
	cfg  config

	mu        sync.Mutex
	keys      map[string][]string
	snaps     []*snap // creation order
	sandboxes []*sbox
	secrets   []*secret
	vols      volumesState // volumes and docker registries (volumes.go)
	counts    map[string]int
	faults    map[string][]fault
	failNext  *failure
	// failSandbox, when set, is the errorReason of the next created sandbox, which then
	// comes back in state error (as Daytona reports a create that failed on a runner).
	failSandbox string
	delayNext   time.Duration
	bi          buildInputState // buildinputs.go, objectstorage.go
	st          storageState    // objectstorage.go

	bx    box // chosen on the first sandbox (sandboxBox)
	bxErr error
	local bool

	// smu guards sessions (toolbox /process/session, sessions.go), keyed by sandbox id
	// and session id; taken after mu when both are held.
	smu      sync.Mutex
	sessions map[string]*tbSession

	clk clock // the emulator's time and sandbox activity (clock.go)
}

// LocalSandboxes reports whether sandboxes run as local bubblewrap sandboxes (known once
// the first sandbox was created).
func (s *Server) LocalSandboxes() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.local
}

type config struct {
	buildDelay, idle, lifecycle, removal time.Duration
	// transition holds per-state lifecycle delays (WithTransitionDelay).
	transition map[string]time.Duration
	regions    []Region // WithRegions (regions.go)
	// activationCooldown and buildLogsDelay: snapshotstates.go.
	activationCooldown, buildLogsDelay time.Duration
	noUploadV2                         bool          // WithoutUploadV2 (uploads.go)
	toolboxLatency                     time.Duration // WithToolboxLatency (latency.go)
	requestLatency                     time.Duration // WithRequestLatency (latency.go)
	// WithStorageRegion, WithoutPushAccessRegion, WithStorageBandwidth (objectstorage.go).
	storageRegion    string
	noPushRegion     bool
	storageBandwidth int
	volumeDelete     *time.Duration // WithVolumeDeleteDelay (volumes.go)
}

// Fixed behaviour of the emulator: injected 429s ask for a 1 s wait (Retry-After), a
// toolbox command runs at most 30 s, and DefaultKey is registered.
const (
	faultRetryAfter = time.Second
	execLimit       = 30 * time.Second
)

// Option configures a Server.
type Option func(*config)

// WithBuildDelay sets how long a snapshot takes from pending to active (or failed): the first
// half is pending, the second building/pulling. Default 20 ms.
func WithBuildDelay(d time.Duration) Option { return func(c *config) { c.buildDelay = d } }

// WithIdleTimeout makes an active snapshot inactive when unused for d (0, the default, never).
func WithIdleTimeout(d time.Duration) Option { return func(c *config) { c.idle = d } }

// WithLifecycleDelay sets how long sandbox transitions (starting, stopping, archiving,
// restoring) last; during them lifecycle calls get 409. Default 0 (immediate).
func WithLifecycleDelay(d time.Duration) Option { return func(c *config) { c.lifecycle = d } }

// WithTransitionDelay sets how long the transitional sandbox state (starting, stopping,
// archiving, restoring) lasts, overriding WithLifecycleDelay for it, so that tests meet
// the 409s and 400s that Daytona gives calls racing a transition. "creating" (never
// taken from WithLifecycleDelay) makes creates slow: a new sandbox is creating for d and
// POST /sandbox answers state unknown, as Daytona does when the sandbox has not started
// within its 30 s wait (slowCreate, sandboxes.go).
func WithTransitionDelay(state string, d time.Duration) Option {
	return func(c *config) {
		if c.transition == nil {
			c.transition = map[string]time.Duration{}
		}
		c.transition[state] = d
	}
}

// WithRemovalDelay sets how long a deleted snapshot stays `removing`. Default 0.
func WithRemovalDelay(d time.Duration) Option { return func(c *config) { c.removal = d } }

// NewServer starts an emulator that is closed when the test ends.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	cfg := config{buildDelay: 20 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	s := &Server{root: t.TempDir(), cfg: cfg, keys: map[string][]string{},
		counts: map[string]int{}, faults: map[string][]fault{}, sessions: map[string]*tbSession{}}
	s.keys[DefaultKey] = slices.Clone(AllPermissions)
	mux := http.NewServeMux()
	s.routes(mux)
	s.ts = httptest.NewServer(mux)
	t.Cleanup(s.ts.Close)
	// Runs before the server closes: end every session, stop and remove every sandbox
	// and the release.
	t.Cleanup(func() {
		s.endSessions("", true)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.bx != nil {
			s.bx.close()
		}
	})
	return s
}

// URL is the API base URL to pass to daytona.New.
func (s *Server) URL() string { return s.ts.URL + "/api" }

// Close stops the server (also done at test cleanup).
func (s *Server) Close() { s.ts.Close() }

// AddKey registers an API key with exactly the given permissions.
func (s *Server) AddKey(key string, perms ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[key] = slices.Clone(perms)
}

// Count returns how many requests reached route, e.g. "POST /snapshots",
// "GET /snapshots/{id}" or "POST /process/execute" (toolbox), counting faulted ones.
func (s *Server) Count(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[route]
}

// Counts returns a copy of every route's request counter.
func (s *Server) Counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.counts)
}

// ResetCounts zeroes the request counters.
func (s *Server) ResetCounts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.counts)
}

type fault struct {
	status     int
	retryAfter time.Duration
	message    string
}

// InjectFaults makes the next n requests to route answer status (429s carry Retry-After,
// Retry-After-authenticated and X-RateLimit-Reset-authenticated). On an object storage
// route (StoragePutRoute and the others) the answer is S3's error document: 500
// InternalError, 503 SlowDown.
func (s *Server) InjectFaults(route string, n, status int) {
	s.InjectFaultsMessage(route, n, status, "injected fault")
}

// InjectFaultsMessage is InjectFaults with the error body's message, for answers a
// client tells apart by it (the toolbox's 500 "failed to open input pipe").
func (s *Server) InjectFaultsMessage(route string, n, status int, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults[route] = append(s.faults[route], fault{status: status, retryAfter: faultRetryAfter, message: message})
	}
}

// takeFault pops the next fault for route. Called with mu held.
func (s *Server) takeFault(route string) (fault, bool) {
	q := s.faults[route]
	if len(q) == 0 {
		return fault{}, false
	}
	s.faults[route] = q[1:]
	return q[0], true
}

// handle registers route (e.g. "POST /snapshots") under prefix with counting, faults,
// authentication and a permission check (perm "" = membership only). fn runs with mu held.
func (s *Server) handle(mux *http.ServeMux, prefix, route, perm string, fn func(w http.ResponseWriter, r *http.Request)) {
	method, path, _ := strings.Cut(route, " ")
	mux.HandleFunc(method+" "+prefix+path, func(w http.ResponseWriter, r *http.Request) {
		s.apiRoundTrip(prefix) // outside the lock, as the network is
		s.mu.Lock()
		locked := true
		defer func() {
			if locked {
				s.mu.Unlock()
			}
		}()
		s.counts[route]++
		if f, ok := s.takeFault(route); ok {
			if f.status == http.StatusTooManyRequests {
				secs := strconv.Itoa(max(1, int(math.Ceil(f.retryAfter.Seconds()))))
				w.Header().Set("Retry-After", secs)
				w.Header().Set("Retry-After-authenticated", secs)
				w.Header().Set("X-RateLimit-Reset-authenticated", secs)
				w.Header().Set("X-RateLimit-Remaining-authenticated", "0")
			}
			writeErr(w, r, f.status, f.message)
			return
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		perms, known := s.keys[tok]
		if !ok || !known {
			// global-auth.guard.ts:64 (v0.190): every failed authentication, an unknown key
			// or a JWT on an API-key-only route, is 401 "Invalid credentials".
			writeErr(w, r, http.StatusUnauthorized, "Invalid credentials")
			return
		}
		if perm != "" && !slices.Contains(perms, perm) {
			writeErr(w, r, http.StatusForbidden, "Forbidden: API key is missing the required permission "+perm)
			return
		}
		if strings.HasPrefix(prefix, "/toolbox") {
			s.touch(r.PathValue("sandboxId")) // toolbox calls are activity (clock.go)
			// Toolbox calls run outside the lock (exec may take long).
			s.mu.Unlock()
			locked = false
			s.toolboxRoundTrip()
		}
		fn(w, r)
	})
}

func (s *Server) routes(mux *http.ServeMux) {
	api := func(route, perm string, fn http.HandlerFunc) { s.handle(mux, "/api", route, perm, fn) }
	api("GET /api-keys/current", "", s.currentKey)
	api("GET /regions", "", s.listRegions)

	api("POST /snapshots", "write:snapshots", s.createSnapshot)
	api("GET /snapshots", "", s.listSnapshots)
	api("GET /snapshots/{id}", "", s.getSnapshot)
	api("DELETE /snapshots/{id}", "delete:snapshots", s.deleteSnapshot)
	api("POST /snapshots/{id}/activate", "write:snapshots", s.activateSnapshot)
	api("POST /snapshots/{id}/deactivate", "write:snapshots", s.deactivateSnapshot)
	api("GET /snapshots/{id}/build-logs-url", "", s.buildLogsURL)
	api("GET /snapshots/{id}/build-logs", "", s.buildLogs)
	s.objectStorageRoutes(mux)

	api("POST /sandbox", "write:sandboxes", s.createSandbox)
	api("GET /sandbox", "", s.listSandboxes)
	api("GET /sandbox/{id}", "", s.getSandbox)
	api("POST /sandbox/{id}/start", "write:sandboxes", s.startSandbox)
	api("POST /sandbox/{id}/stop", "write:sandboxes", s.stopSandbox)
	api("POST /sandbox/{id}/archive", "write:sandboxes", s.archiveSandbox)
	api("DELETE /sandbox/{id}", "delete:sandboxes", s.deleteSandbox)
	api("PUT /sandbox/{id}/secrets", "write:sandboxes", s.putSandboxSecrets)
	api("PUT /sandbox/{id}/labels", "write:sandboxes", s.replaceLabels) // labels.go
	api("POST /sandbox/{id}/network-settings", "write:sandboxes", s.networkSettings)

	api("POST /secret", "manage:secrets", s.createSecret)
	api("GET /secret", "", s.listAllSecrets)
	api("GET /secret/paginated", "", s.listSecrets)
	api("GET /secret/{id}", "", s.getSecret)
	api("PATCH /secret/{id}", "manage:secrets", s.patchSecret)
	api("DELETE /secret/{id}", "manage:secrets", s.deleteSecret)
	s.volumeRoutes(api)

	tb := func(route string, fn http.HandlerFunc) { s.handle(mux, "/toolbox/{sandboxId}", route, "", fn) }
	tb("POST /process/execute", s.execute)
	tb("POST /files/upload-v2", s.uploadV2) // uploads.go
	tb("POST /files/upload", s.uploadV1)
	tb("POST /files/bulk-upload", s.bulkUpload)
	tb("GET /files/download", s.download)
	tb("GET /files", s.listFiles)
	tb("GET /files/info", s.fileInfo)
	tb("POST /files/permissions", s.setFilePermissions) // permissions.go
	tb("DELETE /files", s.deleteFile)
	tb("POST /process/session", s.createSession)
	tb("GET /process/session", s.listSessions)
	tb("GET /process/session/{sessionId}", s.getSession)
	tb("DELETE /process/session/{sessionId}", s.deleteSession)
	tb("POST /process/session/{sessionId}/exec", s.sessionExec)
	tb("GET /process/session/{sessionId}/command/{commandId}", s.sessionCommand)
	tb("GET /process/session/{sessionId}/command/{commandId}/logs", s.sessionLogs)
	tb("POST /process/session/{sessionId}/command/{commandId}/input", s.sessionInput)
}

func (s *Server) currentKey(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	masked := tok
	if len(tok) > 8 {
		masked = tok[:4] + "…" + tok[len(tok)-4:]
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"name": "key-" + masked, "value": masked, "createdAt": time.Now().UTC(),
		"permissions": s.keys[tok], "userId": "user-test",
	})
}

// writeErr writes the API's error body.
// byID is what find finds by the request's {id}, or nil once it has answered 404 with
// notFound, a format that the id fills (Daytona's message for the resource): the
// lookup every by-id route starts with.
func byID[T any](w http.ResponseWriter, r *http.Request, find func(string) *T, notFound string) *T {
	id := r.PathValue("id")
	v := find(id)
	if v == nil {
		writeErr(w, r, 404, fmt.Sprintf(notFound, id))
	}
	return v
}

// dtoer is a pointer to a T that has a wire form (dto): every resource the emulator
// stores.
type dtoer[T any] interface {
	*T
	dto() map[string]any
}

// getByID answers the GET of a by-id route: 200 with the wire form of what find finds
// by {id}, else 404 (byID).
func getByID[T any, P dtoer[T]](w http.ResponseWriter, r *http.Request, find func(string) *T, notFound string) {
	if v := byID(w, r, find, notFound); v != nil {
		writeJSON(w, 200, P(v).dto())
	}
}

// patchByID answers the PATCH of a by-id route: update applies the request to what find
// finds by {id} (else 404, byID), answering a bad request itself and reporting whether
// it applied it; then 200 with the updated wire form.
func patchByID[T any, P dtoer[T]](w http.ResponseWriter, r *http.Request, find func(string) *T, notFound string, update func(P) bool) {
	if v := byID(w, r, find, notFound); v != nil && update(v) {
		writeJSON(w, 200, P(v).dto())
	}
}

// deleteByID answers the DELETE of a by-id route: 204 once what find finds by {id} is
// removed from list, else 404 (byID).
func deleteByID[T any](w http.ResponseWriter, r *http.Request, list *[]*T, find func(string) *T, notFound string) {
	v := byID(w, r, find, notFound)
	if v == nil {
		return
	}
	removeWhere(list, func(x *T) bool { return x == v })
	w.WriteHeader(204)
}

// first is the first item of list that matches, or nil: the lookup of a resource by id
// (or name).
func first[T any](list []*T, match func(*T) bool) *T {
	if i := slices.IndexFunc(list, match); i >= 0 {
		return list[i]
	}
	return nil
}

// removeWhere removes the items of list that match, saying whether there were any.
func removeWhere[T any](list *[]*T, match func(*T) bool) bool {
	n := len(*list)
	*list = slices.DeleteFunc(*list, match)
	return len(*list) != n
}

func writeErr(w http.ResponseWriter, r *http.Request, status int, msg string) {
	writeJSON(w, status, map[string]any{
		"path": r.URL.Path, "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"statusCode": status, "error": http.StatusText(status), "message": msg,
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		writeErr(w, r, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return false
	}
	return true
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return fmt.Sprintf("%s-%s-%s-%s-%s", h[:8], h[8:12], h[12:16], h[16:20], h[20:])
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
	}
	return true
}

// page parses a limit (1..200, default 100) and an offset cursor.
func page(w http.ResponseWriter, r *http.Request) (offset, limit int, ok bool) {
	limit = 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			writeErr(w, r, http.StatusBadRequest, "limit must be between 1 and 200")
			return 0, 0, false
		}
		limit = n
	}
	if v := r.URL.Query().Get("cursor"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeErr(w, r, http.StatusBadRequest, "invalid cursor")
			return 0, 0, false
		}
		offset = n
	}
	return offset, limit, true
}

// cursorPage slices items[offset:offset+limit] and returns the next cursor (nil at the end).
func cursorPage[T any](items []T, offset, limit int) ([]T, any) {
	if offset > len(items) {
		offset = len(items)
	}
	end := min(offset+limit, len(items))
	var next any
	if end < len(items) {
		next = strconv.Itoa(end)
	}
	return items[offset:end], next
}
