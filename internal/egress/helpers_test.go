package egress_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/nettest"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/egress/wire"
)

// testNames are the upstream names every fixture serves (all on 127.0.0.1).
var testNames = []string{"api.allowed.test", "other.allowed.test", "secret.allowed.test", "x.wild.test", "evil.test"}

// upstream is a real TLS server on loopback that records what reached it.
type upstream struct {
	srv   *httptest.Server
	port  string
	mu    sync.Mutex
	reqs  []*http.Request
	token func() string // the value /auth expects in Authorization: Bearer
}

func newUpstream(t testing.TB, ca *nettest.UpstreamTLS, tlsOn bool) *upstream {
	t.Helper()
	u := &upstream{token: func() string { return "" }}
	big := make([]byte, 1<<20)
	mux := http.NewServeMux()
	mux.HandleFunc("/whoami", func(w http.ResponseWriter, r *http.Request) {
		u.record(r)
		fmt.Fprintf(w, "hello from upstream, host=%s\n", r.Host)
	})
	// /auth answers whether the expected credential arrived, without echoing it back.
	mux.HandleFunc("/auth", func(w http.ResponseWriter, r *http.Request) {
		u.record(r)
		want := u.token()
		user, pass, basic := r.BasicAuth()
		ok := want != "" && (r.Header.Get("Authorization") == "Bearer "+want || r.Header.Get("X-Api-Key") == want || basic && user == "git" && pass == want)
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, "authorized")
	})
	// /ws switches protocols when the credential arrived, then echoes lines.
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		u.record(r)
		if r.Header.Get("Upgrade") != "echo" || r.Header.Get("Authorization") != "Bearer "+u.token() {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprintf(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		line, _ := brw.ReadString('\n')
		fmt.Fprintf(c, "echo: %s", line)
	})
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		var n int64
		_, _ = fmt.Sscan(r.URL.Query().Get("n"), &n) // none or bad: no bytes
		w.Header().Set("Content-Length", fmt.Sprint(n))
		for n > 0 {
			k := min(n, int64(len(big)))
			if _, err := w.Write(big[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	u.srv = httptest.NewUnstartedServer(mux)
	u.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tlsOn {
		u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Cert}}
		u.srv.StartTLS()
	} else {
		u.srv.Start()
	}
	t.Cleanup(u.srv.Close)
	_, u.port, _ = net.SplitHostPort(u.srv.Listener.Addr().String())
	return u
}

func (u *upstream) record(r *http.Request) {
	u.mu.Lock()
	u.reqs = append(u.reqs, r.Clone(context.Background()))
	u.mu.Unlock()
}

func (u *upstream) requests() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.reqs...)
}

// fakeResolver stands in for DNS and counts every name it is asked.
type fakeResolver struct {
	mu    sync.Mutex
	addrs map[string][]netip.Addr
	asked map[string]int
}

func newResolver() *fakeResolver {
	r := &fakeResolver{addrs: map[string][]netip.Addr{}, asked: map[string]int{}}
	for _, n := range testNames {
		r.addrs[n] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	}
	r.addrs["meta.allowed.test"] = []netip.Addr{netip.MustParseAddr("169.254.169.254")}
	r.addrs["private.allowed.test"] = []netip.Addr{netip.MustParseAddr("10.1.2.3")}
	r.addrs["harness.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.2")}
	r.addrs["rebind.allowed.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.168.1.1")}
	r.addrs["ula.allowed.test"] = []netip.Addr{netip.MustParseAddr("fd00:ec2::254")}
	return r
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked[host]++
	if a, ok := r.addrs[host]; ok {
		return append([]netip.Addr(nil), a...), nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *fakeResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked[host]
}

func (r *fakeResolver) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.asked {
		n += c
	}
	return n
}

// secretStore is a mutable secret source, as the harness's environment store would be.
type secretStore struct {
	mu      sync.Mutex
	secrets []egress.Secret
}

func (s *secretStore) set(list ...egress.Secret) {
	s.mu.Lock()
	s.secrets = list
	s.mu.Unlock()
}

func (s *secretStore) source(context.Context) ([]egress.Secret, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]egress.Secret(nil), s.secrets...), nil
}

// decisions collects a proxy's log.
type decisions struct {
	mu   sync.Mutex
	list []egress.Decision
}

func (d *decisions) sink(x egress.Decision) {
	d.mu.Lock()
	d.list = append(d.list, x)
	d.mu.Unlock()
}

func (d *decisions) all() []egress.Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]egress.Decision(nil), d.list...)
}

// has reports whether a decision for host with the reason ("" = allowed) was logged.
func (d *decisions) has(host, reason string) bool {
	for _, x := range d.all() {
		if x.Host == host && x.Reason == reason && x.Allowed == (reason == "") {
			return true
		}
	}
	return false
}

// fixture is one sandbox's proxy serving a unix socket, with its upstreams.
type fixture struct {
	ca       *nettest.UpstreamTLS
	up       *upstream // TLS
	plainUp  *upstream // plain http
	resolver *fakeResolver
	secrets  *secretStore
	log      *decisions
	proxy    *egress.Proxy
	socket   string
	dir      string
}

type fixtureOpt func(*egress.Config)

func newFixture(t testing.TB, pol egress.Policy, secrets []egress.Secret, opts ...fixtureOpt) *fixture {
	t.Helper()
	f := &fixture{ca: nettest.NewUpstreamTLS(t, testNames, net.ParseIP("127.0.0.1")), resolver: newResolver(), secrets: &secretStore{}, log: &decisions{}, dir: t.TempDir()}
	f.up = newUpstream(t, f.ca, true)
	f.plainUp = newUpstream(t, f.ca, false)
	f.secrets.set(secrets...)
	cfg := egress.Config{
		SandboxID:   "sbx-test",
		Policy:      pol,
		Secrets:     f.secrets.source,
		Log:         f.log.sink,
		Resolver:    f.resolver,
		RootCAs:     f.ca.Pool,
		SystemRoots: f.ca.CAPEM,
		AllowAddrs:  []netip.Addr{netip.MustParseAddr("127.0.0.1")},
	}
	for _, o := range opts {
		o(&cfg)
	}
	p, err := egress.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.proxy = p
	// The socket alone in a directory of its own, as the runtime requires (it binds
	// the directory).
	f.socket = filepath.Join(f.dir, "sock", wire.SocketName)
	if err := os.Mkdir(filepath.Dir(f.socket), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := egress.Listen(f.socket)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(ln) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return f
}

// sandboxRoots is what a client in the sandbox trusts: the CA bundle from Files.
func (f *fixture) sandboxRoots(t testing.TB) *x509.CertPool {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(f.proxy.Files()[egress.FileCABundle]) {
		t.Fatal("CA bundle has no certificates")
	}
	return pool
}

// client is an HTTP client as a sandbox program would use it, with the unix socket
// standing in for netd.
func (f *fixture) client(t testing.TB) *http.Client {
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", f.socket)
		},
		TLSClientConfig: &tls.Config{RootCAs: f.sandboxRoots(t)},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

func (f *fixture) url(host, path string) string {
	return "https://" + net.JoinHostPort(host, f.up.port) + path
}

// connect sends a raw CONNECT for target over the socket and returns the response and
// the connection (open only after a 200).
func (f *fixture) connect(t testing.TB, target string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", f.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	return resp, c, br
}

// denyReason checks a refusal's header and JSON body agree and returns the reason.
func denyReason(t testing.TB, resp *http.Response) string {
	t.Helper()
	if resp.StatusCode == http.StatusOK {
		t.Fatalf("status 200, want a refusal")
	}
	var body struct {
		Error, Reason, Message string
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("refusal body %q is not JSON: %v", b, err)
	}
	if body.Error != "egress_denied" || body.Reason != resp.Header.Get(egress.DenyHeader) || body.Message == "" {
		t.Fatalf("refusal header %q and body %s disagree", resp.Header.Get(egress.DenyHeader), b)
	}
	return body.Reason
}
