//go:build linux

package local

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/nettest"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// netdEnv points the end-to-end egress test at a prebuilt trueforge-netd (the
// unprivileged run uses it: the user it runs as cannot build).
const netdEnv = "TRUEFORGE_TEST_NETD"

// buildNetd builds cmd/trueforge-netd static, as the harness ships it.
func buildNetd(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(netdEnv); p != "" {
		return p
	}
	return buildStatic(t, "cmd/trueforge-netd")
}

// e2eUpstream is a real TLS server on the host's loopback with a CA of its own (standing
// in for the public roots), serving allowedHost; it records the Authorization headers
// that reach it.
type e2eUpstream struct {
	caPEM []byte
	pool  *x509.CertPool
	port  string
	mu    sync.Mutex
	auth  []string
}

const allowedHost = "api.allowed.test"

func newE2EUpstream(t *testing.T, secret string) *e2eUpstream {
	t.Helper()
	id := nettest.NewUpstreamTLS(t, []string{allowedHost})
	u := &e2eUpstream{caPEM: id.CAPEM, pool: id.Pool}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Authorization")
		u.mu.Lock()
		u.auth = append(u.auth, a)
		u.mu.Unlock()
		// Answers whether the real credential arrived, without echoing anything back.
		if a != "Bearer "+secret {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, "authorized")
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{id.Cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, u.port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return u
}

func (u *e2eUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.auth...)
}

// e2eResolver stands in for public DNS on the harness side: allowedHost is the upstream
// on 127.0.0.1 (exempted through Config.AllowAddrs, the address check stays on); it
// counts what it is asked, to show refused names are never resolved.
type e2eResolver struct {
	mu    sync.Mutex
	asked map[string]int
}

func (r *e2eResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked[host]++
	if host == allowedHost {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *e2eResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked[host]
}

// secretUpstream is a fresh secret, its value starting with prefix, and an e2eUpstream
// that admits it alone.
func secretUpstream(t *testing.T, prefix string) (string, *e2eUpstream) {
	t.Helper()
	secret := unguessable(prefix + "-secret-")
	return secret, newE2EUpstream(t, secret)
}

// e2eConfig is the proxy configuration of sandbox id in the end-to-end egress tests:
// allowedHost alone is allowed and is sent secret as API_TOKEN, names resolve through
// res, the upstream's CA stands for the public roots, and its loopback address is
// exempt from the refusal of private addresses.
func e2eConfig(id, secret string, up *e2eUpstream, res *e2eResolver) egress.Config {
	return egress.Config{
		SandboxID: id,
		Policy:    egress.Policy{AllowDomains: []string{allowedHost}},
		Secrets: func(context.Context) ([]egress.Secret, error) {
			return []egress.Secret{{Name: "API_TOKEN", Value: secret, Hosts: []string{allowedHost}}}, nil
		},
		Resolver:    res,
		RootCAs:     up.pool,
		SystemRoots: up.caPEM,
		AllowAddrs:  []netip.Addr{netip.MustParseAddr("127.0.0.1")},
	}
}

// serveProxy serves p on a unix socket at sock until stop is called or, at the latest,
// the test ends; stopping closes p and fails the test if Serve did.
func serveProxy(t testing.TB, p *egress.Proxy, sock string) (stop func()) {
	t.Helper()
	ln, err := egress.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			p.Close()
			if err := <-served; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestEgressEndToEnd runs a real sandbox behind the real egress proxy and trueforge-netd:
// an allowed host is reached through the proxy with the secret substituted on the way
// out, everything else is refused with a reason, names resolve only to synthetic
// addresses, and the secret's value is nowhere in the sandbox.
func TestEgressEndToEnd(t *testing.T) {
	t.Parallel()
	requireHostTools(t, "python3", "curl")
	netdBin := buildNetd(t)
	r, rel := newTestRuntime(t)
	ctx := context.Background()

	secret, up := secretUpstream(t, "e2e")
	res := &e2eResolver{asked: map[string]int{}}
	var logMu sync.Mutex
	var decisions []egress.Decision
	cfg := e2eConfig("net", secret, up, res)
	cfg.Log = func(d egress.Decision) {
		logMu.Lock()
		decisions = append(decisions, d)
		logMu.Unlock()
	}
	p, err := egress.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "egress.sock")
	serveProxy(t, p, sock)
	env := p.Env()
	placeholder := env["API_TOKEN"]
	if !strings.HasPrefix(placeholder, egress.PlaceholderPrefix) {
		t.Fatalf("API_TOKEN in the sandbox's environment is %q, want a placeholder", placeholder)
	}
	if _, ok := p.Files()[egressResolvConf]; !ok {
		t.Fatalf("the proxy's files have no %s (egress.FileResolvConf is %q): the runtime binds that name over /etc/resolv.conf", egressResolvConf, egress.FileResolvConf)
	}
	create(t, r, sandbox.CreateRequest{ID: "net", SnapshotID: rel, Env: env, Egress: egressHook(p, sock, netdBin)})

	allowed := "https://" + net.JoinHostPort(allowedHost, up.port) + "/auth"
	authorized := `curl -sS --max-time 20 -v -o /workspace/auth.out -H "Authorization: Bearer $API_TOKEN" ` + allowed + ` 2>/workspace/curl.log || { cat /workspace/curl.log; exit 1; }; cat /workspace/auth.out`
	for round := 0; round < 2; round++ {
		// The first command after a (re)start already finds netd listening.
		if got := mustSh(t, r, "net", authorized); got != "authorized" {
			t.Fatalf("round %d: the allowed host answered %q", round, got)
		}
		if round == 0 {
			if err := r.Stop(ctx, "net"); err != nil {
				t.Fatal(err)
			}
			if err := r.Start(ctx, "net"); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, a := range up.seen() {
		if a != "Bearer "+secret {
			t.Fatalf("the upstream saw Authorization %q, want the real secret", a)
		}
	}
	if log := mustSh(t, r, "net", "cat /workspace/curl.log"); !strings.Contains(log, "Bearer "+placeholder) {
		t.Fatalf("curl did not send the placeholder (so the check below proves nothing):\n%s", log)
	}

	// A host off the allow list: the CONNECT is refused with the reason, and so is a
	// plain http:// request, whose body says why.
	denied := sh(t, r, "net", `curl -sS -v --max-time 20 https://evil.test:`+up.port+`/ 2>&1`)
	if out := strings.ToLower(string(denied.Stdout)); denied.ExitCode == 0 || !strings.Contains(out, "< http/1.1 403") ||
		!strings.Contains(out, strings.ToLower(egress.DenyHeader)+": "+egress.ReasonNotAllowed) {
		t.Fatalf("denied host over https: exit %d\n%s", denied.ExitCode, denied.Stdout)
	}
	if got := mustSh(t, r, "net", `curl -sS --max-time 20 -w '\n%{http_code}' http://evil.test:`+up.port+`/`); !strings.HasSuffix(got, "\n403") ||
		!strings.Contains(got, `"reason":"`+egress.ReasonNotAllowed+`"`) {
		t.Fatalf("denied host over http: %s", got)
	}
	if n := res.count("evil.test"); n != 0 {
		t.Fatalf("the proxy resolved a refused name %d times", n)
	}

	// A raw IP: refused by the proxy, and without it there is no route at all; the
	// host's loopback (where the upstream listens) is not the sandbox's.
	if got := mustSh(t, r, "net", `curl -sS --max-time 20 -w '\n%{http_code}' http://203.0.113.10/`); !strings.HasSuffix(got, "\n403") ||
		!strings.Contains(got, `"reason":"`+egress.ReasonIPLiteral+`"`) {
		t.Fatalf("raw IP through the proxy: %s", got)
	}
	direct := sh(t, r, "net", `curl -sS --noproxy '*' --max-time 5 http://203.0.113.10/; echo "exit $?"; curl -sS --noproxy '*' --max-time 5 https://127.0.0.1:`+up.port+`/; echo "exit $?"`)
	if got := string(direct.Stdout); got != "exit 7\nexit 7\n" {
		t.Fatalf("direct connections: %q, want both refused (curl exit 7)\n%s", got, direct.Stderr)
	}

	// Names resolve, through /etc/resolv.conf and netd, to synthetic addresses only.
	synth := netip.MustParsePrefix("198.18.0.0/15")
	lines := strings.Split(mustSh(t, r, "net", "cat /etc/resolv.conf; getent hosts "+allowedHost+" evil.test"), "\n")
	var addrs []string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) == 2 && (f[1] == allowedHost || f[1] == "evil.test") {
			if a, err := netip.ParseAddr(f[0]); err != nil || !synth.Contains(a) {
				t.Fatalf("%s resolved to %s, want an address in %s", f[1], f[0], synth)
			}
			addrs = append(addrs, f[0])
		}
	}
	if !strings.Contains(strings.Join(lines, "\n"), "nameserver 127.0.0.1") || len(addrs) != 2 || addrs[0] == addrs[1] {
		t.Fatalf("resolv.conf and lookups:\n%s", strings.Join(lines, "\n"))
	}
	if n := res.count("evil.test"); n != 0 {
		t.Fatalf("a lookup in the sandbox reached the harness's resolver (%d times)", n)
	}
	if got := mustSh(t, r, "net", `echo nameserver 1.1.1.1 > /etc/resolv.conf 2>/dev/null && echo wrote || echo ro`); got != "ro" {
		t.Fatalf("/etc/resolv.conf is writable in the sandbox: %s", got)
	}

	// The user's commands still cannot create unix sockets (only netd can).
	if got := mustSh(t, r, "net", `python3 -c '
import socket, errno
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    print("unix ok")
except OSError as e:
    print("unix", errno.errorcode[e.errno])'`); got != "unix EPERM" {
		t.Fatalf("AF_UNIX in a command: %s", got)
	}

	// The secret's value is nowhere in the sandbox: not in any environment it can read,
	// nor in its files. netd's environment it cannot read at all: netd is not dumpable.
	// The dump must show the placeholder, that netd's environment is closed and curl's
	// trace, or it proves nothing.
	dump := sh(t, r, "net", `env; for p in /proc/[0-9]*; do tr '\0' '\n' < $p/environ 2>/dev/null; done
for p in /proc/[0-9]*; do if [ "$(tr -d '\0' < $p/cmdline 2>/dev/null)" = /run/trueforge/netd ]; then cat $p/environ >/dev/null 2>&1 && echo netd-environ-open || echo netd-environ-closed; fi; done
for f in /run/trueforge/*; do case $f in */init|*/netd|*/egress) ;; *) cat "$f";; esac; done
cat /etc/resolv.conf; find /workspace /tmp -xdev -type f -exec cat {} + 2>/dev/null; exit 0`)
	out := string(dump.Stdout)
	if dump.Truncated {
		t.Fatalf("the sandbox dump was truncated (%d bytes kept)", len(out))
	}
	for _, want := range []string{"API_TOKEN=" + placeholder, "netd-environ-closed", "Bearer " + placeholder, "nameserver 127.0.0.1", "# trueforge sandbox egress CA"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the sandbox dump lacks %q (%d bytes)", want, len(out))
		}
	}
	if strings.Contains(out+string(dump.Stderr), secret) {
		t.Fatal("the secret's value is visible inside the sandbox")
	}
	// On the host, nothing the runtime keeps for the sandbox holds it either: upper
	// layers, workspace, egress files, keeper log, state.
	_ = filepath.WalkDir(r.dir("net"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil //nolint:nilerr // what cannot be read holds no secret to find
		}
		if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(secret)) {
			t.Errorf("the secret's value is in %s", path)
		}
		return nil
	})

	logMu.Lock()
	defer logMu.Unlock()
	want := map[string]bool{allowedHost + " allowed": false, "evil.test " + egress.ReasonNotAllowed: false, "203.0.113.10 " + egress.ReasonIPLiteral: false}
	for _, d := range decisions {
		k := d.Host + " " + d.Reason
		if d.Allowed {
			k = d.Host + " allowed"
		}
		if _, ok := want[k]; ok {
			want[k] = true
		}
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("no decision %q in the proxy's log: %+v", k, decisions)
		}
	}
}
