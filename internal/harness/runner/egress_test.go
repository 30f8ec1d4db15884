package runner_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/nettest"

	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sandboxnet"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/telemetry"
)

// The netd helper: trueforge-harness built static, once per test binary.
var (
	helperOnce sync.Once
	helperPath string
	helperErr  error
	helperDir  string
)

func netdHelper(t testing.TB) string {
	t.Helper()
	helperOnce.Do(func() {
		if helperDir, helperErr = os.MkdirTemp("", "tfh-netd-"); helperErr == nil {
			helperPath, helperErr = harnesstest.BuildStaticHarness(helperDir)
		}
	})
	if helperErr != nil {
		t.Fatal(helperErr)
	}
	return helperPath
}

// upstreamTLS is a TLS server on loopback with a CA of its own (standing in for the
// public roots), answering for the names in hosts. /auth says whether the Authorization
// header carried want(), without echoing it.
type upstreamTLS struct {
	srv   *httptest.Server
	port  string
	caPEM []byte
	pool  *x509.CertPool
	mu    sync.Mutex
	want  string
	seen  []string // Authorization headers that reached it
}

func newUpstreamTLS(t *testing.T, hosts ...string) *upstreamTLS {
	t.Helper()
	id := nettest.NewUpstreamTLS(t, hosts)
	u := &upstreamTLS{caPEM: id.CAPEM, pool: id.Pool}
	mux := http.NewServeMux()
	mux.HandleFunc("/auth", func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		got := r.Header.Get("Authorization")
		u.seen = append(u.seen, got)
		ok := u.want != "" && got == "Bearer "+u.want
		u.mu.Unlock()
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, "authorized by upstream")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello from", r.Host) })
	u.srv = httptest.NewUnstartedServer(mux)
	u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{id.Cert}}
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	_, u.port, _ = net.SplitHostPort(u.srv.Listener.Addr().String())
	return u
}

func (u *upstreamTLS) expect(v string) {
	u.mu.Lock()
	u.want = v
	u.mu.Unlock()
}

func (u *upstreamTLS) headers() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.seen...)
}

// loopbackResolver answers every name with 127.0.0.1, as the test's DNS.
type loopbackResolver struct{}

func (loopbackResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// egressFixture is a local environment whose allow list names one loopback TLS host,
// with one secret bound to it, a harness (manager + proxies) with decisions going to the
// session log, and harness logs captured.
type egressFixture struct {
	env     *harnesstest.Env
	up      *upstreamTLS
	box     *secretbox.Box
	logs    *bytes.Buffer
	logMu   *sync.Mutex
	manager *lifecycle.Manager
	proxies *sandboxnet.Proxies
	clock   *harnesstest.Clock
	logger  *slog.Logger
	// telemetry is what the next newHarness's manager traces with (the reaper's steps).
	telemetry *telemetry.Provider
}

const (
	allowedHost = "api.allowed.test"
	deniedHost  = "evil.test"
	secretV1    = "sk-live-REALVALUE-1111aaaa"
	secretV2    = "sk-live-ROTATED-2222bbbb"
	secretLate  = "sk-live-LATEADD-3333cccc"
)

type lockedBuffer struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func newEgressFixture(t *testing.T) *egressFixture {
	t.Helper()
	helper := netdHelper(t)
	env := harnesstest.NewEnv(t)
	editEnvironment(t, env.Store, "default", func(e *store.Environment) {
		e.AllowDomains = []string{allowedHost}
	})
	t.Setenv(secretbox.KeyEnv, "")
	box, err := secretbox.Load("", filepath.Join(env.Store.Dir(), "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	f := &egressFixture{env: env, up: newUpstreamTLS(t, allowedHost, deniedHost), box: box, logs: &bytes.Buffer{}, logMu: &sync.Mutex{}, clock: harnesstest.NewClock()}
	f.putSecret(t, "API_TOKEN", secretV1, true)
	f.up.expect(secretV1)
	f.newHarness(t, helper)
	return f
}

// newHarness starts a harness: a fresh manager and fresh proxies on the same store, as
// a new harness process would.
func (f *egressFixture) newHarness(t *testing.T, helper string) {
	t.Helper()
	st := f.env.Store
	logger := slog.New(slog.NewTextHandler(lockedBuffer{f.logMu, f.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f.logger = logger
	if f.proxies != nil {
		f.proxies.Close()
	}
	f.proxies = sandboxnet.New(sandboxnet.Config{
		Store: st, Dir: controlplane.New(st).EgressDir(), Helper: helper, Logger: logger,
		Record: func(ctx context.Context, sessionID string, p events.Payload) {
			if _, err := events.Append(ctx, st, sessionID, "", p); err != nil {
				t.Errorf("recording %s: %v", p.Kind(), err)
			}
		},
		Resolver: loopbackResolver{}, AllowAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")},
		RootCAs: f.up.pool, SystemRoots: f.up.caPEM,
	})
	t.Cleanup(f.proxies.Close)
	f.manager = lifecycle.New(lifecycle.Config{Store: st, Runtimes: harnesstest.Source{C: f.env.Runtime}, Logger: logger, Now: f.clock.Now,
		Network: f.proxies, Telemetry: f.telemetry})
}

func (f *egressFixture) putSecret(t *testing.T, name, value string, create bool) {
	t.Helper()
	id := store.SecretID("default", name)
	sealed, err := f.box.Seal([]byte(value), "secret/"+id)
	if err != nil {
		t.Fatal(err)
	}
	if create {
		must(t, f.env.Store.CreateSecret(context.Background(), store.Secret{ID: id, Environment: "default", EnvName: name, Hosts: []string{allowedHost}, ValueEnc: sealed}))
		return
	}
	must(t, f.env.Store.UpdateSecret(context.Background(), id, []string{allowedHost}, sealed))
}

func (f *egressFixture) runner(t *testing.T, agent string) *runner.Runner {
	t.Helper()
	r := (&fixture{env: f.env}).runnerNoSandbox(t, agent)
	r.Tools = &tools.Executor{Store: f.env.Store, Sandboxes: f.manager, Now: f.clock.Now}
	r.Logger = f.logger
	return r
}

func curlAuth(port string) string {
	return fmt.Sprintf(`curl -sS --max-time 20 -H "Authorization: Bearer $API_TOKEN" https://%s:%s/auth`, allowedHost, port)
}

// End to end on the local backend: a session whose environment allows one host runs
// curl in its sandbox through the harness's egress proxy. The allowed host gets the
// secret substituted; a denied host is refused with a reason the model reads in the tool
// result; every decision is in the session log; rotation and removal reach the running
// sandbox on the next request; a secret added later never reaches it; a restarted
// harness recreates the proxy with the same placeholders; and the secret's value is
// never in the sandbox, the store or the logs.
func TestEgressEndToEndLocalSandbox(t *testing.T) {
	f := newEgressFixture(t)
	ctx := context.Background()
	port := f.up.port
	harnesstest.AddAgent(t, f.env.Store, "net", "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			// turn 1: allowed with the secret, denied host, what the sandbox holds
			exec(curlAuth(port)),
			exec(fmt.Sprintf(`curl -sS -v --max-time 20 https://%s:%s/ 2>&1 | grep -i -e '^< HTTP' -e 'x-trueforge-deny'; echo; curl -sS --max-time 20 http://%s:%s/`, deniedHost, port, deniedHost, port)),
			exec(`echo "token=$API_TOKEN late=${LATE_TOKEN:-unset}"; echo "environ=$(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c 'sk-live-')"; grep -rIl 'sk-live-' /workspace /tmp /run/trueforge /etc 2>/dev/null; echo files-searched; echo "dns=$(getent hosts api.allowed.test | cut -d' ' -f1)"`),
			text("turn 1 done"),
			// turn 2: after rotation
			exec(curlAuth(port)), text("turn 2 done"),
			// turn 2b: after an idle stop (the proxy closed with the sandbox); leaves a
			// process running in the background
			exec(curlAuth(port)+`; setsid sleep 600 >/dev/null 2>&1 </dev/null & echo $! > /workspace/bg.pid`), text("turn 2b done"),
			// turn 3: after a harness restart (new proxies, same placeholders, same
			// socket path: the running sandbox is not restarted)
			exec(curlAuth(port)+`; kill -0 "$(cat /workspace/bg.pid)" && echo background-alive`), text("turn 3 done"),
			// turn 4: after removal
			exec(curlAuth(port)), text("turn 4 done"),
		),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
	r := f.runner(t, "net")
	sid := ownerSession(t, r)
	mustRun(t, r, sid, "go")
	res := results(t, f.env.Store, sid)
	if len(res) != 3 {
		t.Fatalf("%d tool results; want 3", len(res))
	}
	if got := res[0]["text"].(string); !strings.Contains(got, "authorized by upstream") {
		t.Fatalf("allowed host with the secret: %q", got)
	}
	if h := f.up.headers(); len(h) != 1 || h[0] != "Bearer "+secretV1 {
		t.Fatalf("upstream saw Authorization %q; want the real value substituted once", h)
	}
	denied := res[1]["text"].(string)
	if !strings.Contains(denied, "403") || !strings.Contains(denied, "not_allowed") || strings.Contains(denied, "hello from") {
		t.Fatalf("denied host: the tool result lacks the 403 and its reason: %q", denied)
	}
	inside := res[2]["text"].(string)
	// A placeholder in the environment, no value in any process's environment (/proc)
	// nor in a file (grep -l lists none before files-searched), the late secret unset,
	// and a name answered by netd's DNS with a synthetic address (not the real one).
	if !strings.Contains(inside, "token=tfph_") || !strings.Contains(inside, "late=unset") ||
		!strings.Contains(inside, "environ=0\nfiles-searched") || strings.Contains(inside, secretV1) ||
		strings.Contains(inside, "dns=\n") || strings.Contains(inside, "dns=127.0.0.1") {
		t.Fatalf("the sandbox's environment: %q; want a placeholder only", inside)
	}

	// The decisions are in the session log: the allowed request with the secret named
	// (not its value), the refusals with their reason.
	var allowed, refused int
	count := func(ds []map[string]any) bool {
		allowed, refused = 0, 0
		for _, d := range ds {
			switch {
			case d["allowed"] == true && d["host"] == allowedHost:
				if s, _ := d["secrets"].([]any); len(s) == 1 && s[0] == "API_TOKEN" {
					allowed++
				}
			case d["allowed"] != true && d["host"] == deniedHost && d["reason"] == "not_allowed":
				refused++
			}
		}
		return allowed > 0 && refused >= 2
	}
	count(waitPayloads(t, f.env.Store, sid, events.KindEgress, count))
	if allowed == 0 || refused < 2 {
		t.Fatalf("egress events: %d allowed with API_TOKEN, %d refused for %s; want >= 1 and 2", allowed, refused, deniedHost)
	}

	// A secret added after the sandbox was created never reaches it.
	f.putSecret(t, "LATE_TOKEN", secretLate, true)
	// Rotation: the running sandbox's next request carries the new value.
	f.putSecret(t, "API_TOKEN", secretV2, false)
	f.up.expect(secretV2)
	mustRun(t, r, sid, "rotated")
	if got := lastResult(t, f.env.Store, sid); !strings.Contains(got, "authorized by upstream") {
		t.Fatalf("after rotation: %q", got)
	}
	if got := harnesstest.Payloads(t, f.env.Store, sid, "sandbox_provisioned"); len(got) != 1 {
		t.Fatalf("%d sandboxes provisioned; rotation must reach the running one", len(got))
	}

	// An idle stop closes the proxy with the sandbox; the next call resumes both.
	f.clock.Advance(16 * time.Minute)
	if trs, err := f.manager.Reap(ctx); err != nil || len(trs) != 1 || trs[0].To != store.SandboxStateStopped {
		t.Fatalf("reap: %+v %v; want one stop", trs, err)
	}
	if live := f.proxies.Live(); len(live) != 0 {
		t.Fatalf("proxies still running after the stop: %v", live)
	}
	mustRun(t, r, sid, "after stop")
	if got := lastResult(t, f.env.Store, sid); !strings.Contains(got, "authorized by upstream") || !strings.Contains(got, "resumed") {
		t.Fatalf("after an idle stop: %q", got)
	}
	if len(f.proxies.Live()) != 1 {
		t.Fatal("no proxy after the resume")
	}

	// A harness restart: the proxy is recreated from its sealed state at the same path,
	// in the socket directory the sandbox has bound, so the running sandbox reaches it
	// as it is: its placeholder still works and the earlier turn's background process
	// is alive (no restart, nothing to tell the model).
	sb, err := f.env.Store.GetSessionSandbox(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := f.env.Runtime.Runtime.Get(ctx, sb.SandboxID); err != nil || info.Status != sandbox.SandboxRunning {
		t.Fatalf("before the harness restart: %+v %v; want Running", info, err)
	}
	lifecycleKinds := []string{"sandbox_network_reattached", "sandbox_resumed", "sandbox_reclaimed", "sandbox_lost", "sandbox_provisioned"}
	counts := map[string]int{}
	for _, k := range lifecycleKinds {
		counts[k] = len(harnesstest.Payloads(t, f.env.Store, sid, k))
	}
	f.newHarness(t, netdHelper(t))
	r = f.runner(t, "net")
	mustRun(t, r, sid, "restarted")
	if got := lastResult(t, f.env.Store, sid); !strings.Contains(got, "authorized by upstream") || !strings.Contains(got, "background-alive") ||
		strings.Contains(got, "restarted") {
		t.Fatalf("after a harness restart: %q; want the request through the new proxy and the background process alive", got)
	}
	for _, k := range lifecycleKinds {
		if n := len(harnesstest.Payloads(t, f.env.Store, sid, k)); n != counts[k] {
			t.Fatalf("%d %s events after the harness restart, %d before; want no lifecycle change", n, k, counts[k])
		}
	}

	// Removal: refused at once, with a reason.
	must(t, f.env.Store.DeleteSecret(ctx, store.SecretID("default", "API_TOKEN")))
	mustRun(t, r, sid, "removed")
	if got := lastResult(t, f.env.Store, sid); strings.Contains(got, "authorized by upstream") || !strings.Contains(got, `"reason":"secret_removed"`) {
		t.Fatalf("after removal: %q; want a refusal", got)
	}
	for _, h := range f.up.headers() {
		if strings.Contains(h, secretLate) {
			t.Fatal("the secret added after the sandbox was created reached the upstream")
		}
	}

	// The values are nowhere: not in the sandbox's files or records (everything under
	// the local backend's directory), the database, or the harness's logs.
	f.proxies.Close()
	for _, v := range []string{secretV1, secretV2, secretLate} {
		assertNowhere(t, f, v)
	}
}

func assertNowhere(t *testing.T, f *egressFixture, value string) {
	t.Helper()
	f.logMu.Lock()
	logs := f.logs.String()
	f.logMu.Unlock()
	if strings.Contains(logs, value) {
		t.Errorf("the harness log holds a secret value")
	}
	syscall.Sync() // what the sandbox wrote is on its disk image
	err := filepath.WalkDir(f.env.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil //nolint:nilerr // what cannot be read holds no secret to find
		}
		if d.IsDir() && d.Name() == "snapshots" {
			return fs.SkipDir // made before any secret existed
		}
		if !d.Type().IsRegular() {
			return nil
		}
		// Data extents only: a sandbox's 3 GB sparse disk image is searched in the time
		// its written blocks take.
		if found, err := harnesstest.FileContains(p, []byte(value)); err == nil && found[0] {
			t.Errorf("%s holds a secret value in plaintext", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A harness killed mid-command in a sandbox with egress: the next harness stops the
// orphaned command, recreates the proxy from the sealed state the dead one recorded (the
// same CA and placeholders the sandbox holds), and the session's next request through it
// works with the secret substituted.
func TestHarnessKilledWithEgressResumesThroughANewProxy(t *testing.T) {
	f := newEgressFixture(t)
	ctx := context.Background()
	marker := "tfegcrash" + time.Now().Format("150405.000000")
	harnesstest.AddAgent(t, f.env.Store, "crashnet", "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			exec(curlAuth(f.up.port)+"; echo before > mark.txt; sleep 300 # "+marker),
			exec(curlAuth(f.up.port)+"; cat mark.txt"), text("resumed fine")),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
	r := f.runner(t, "crashnet")
	sid := ownerSession(t, r)
	caFile := filepath.Join(t.TempDir(), "upstream-ca.pem")
	must(t, os.WriteFile(caFile, f.up.caPEM, 0o600))
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "HELPER_DB="+f.env.Store.Path(), "HELPER_AGENT=crashnet", "HELPER_SESSION="+sid,
		"HELPER_PROMPT=start", "HELPER_NETD="+netdHelper(t), "HELPER_UPSTREAM_CA="+caFile)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("the helper harness exited early: %s; %v %v", stderr.String(), kinds(t, f.env.Store, sid), results(t, f.env.Store, sid))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for the helper's command (stderr: %s)", stderr.String())
		}
		rec, err := f.env.Store.GetSessionSandbox(ctx, sid)
		if err != nil {
			continue
		}
		if _, err = f.env.Runtime.Runtime.ReadFile(ctx, rec.SandboxID, "mark.txt", 0); err == nil && len(sandboxtest.ProcessesWith(marker)) > 0 {
			break
		}
	}
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	<-exited
	if h := f.up.headers(); len(h) != 1 || h[0] != "Bearer "+secretV1 {
		t.Fatalf("before the kill the upstream saw %q (helper stderr: %s)", h, stderr.String())
	}

	out := mustRun(t, r, sid, "are you still there?")
	if out.Text != "resumed fine" {
		t.Fatalf("resumed turn answered %q", out.Text)
	}
	if p := sandboxtest.ProcessesWith(marker); len(p) > 0 {
		t.Fatalf("the dead harness's command still runs: %v", p)
	}
	got := lastResult(t, f.env.Store, sid)
	if !strings.Contains(got, "authorized by upstream") || !strings.Contains(got, "before") {
		t.Fatalf("after the crash: %q; want the request through the new proxy to carry the secret, and the files kept", got)
	}
	if h := f.up.headers(); len(h) != 2 || h[1] != "Bearer "+secretV1 {
		t.Fatalf("upstream saw %q", h)
	}
	if len(harnesstest.Payloads(t, f.env.Store, sid, "sandbox_reclaimed")) != 1 {
		t.Fatal("no sandbox_reclaimed event")
	}
}
