//go:build linux

package local

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/nettest"

	"github.com/trueforge/terraform-provider-trueforge/internal/asuser"
	"github.com/trueforge/terraform-provider-trueforge/internal/packageindex"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
)

// fakeIndex serves a package index page on loopback, as pypi.org would.
func fakeIndex(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "fake index: %s %s\n", r.Host, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// probeScript fetches from the fake index as pypi.org, and as a host not on the list,
// through the proxy variables, then directly; it records each outcome in the layer.
func probeScript(port string) string {
	return fmt.Sprintf(`
mkdir -p /usr/local/share/probe
cd /usr/local/share/probe
curl -fsS --max-time 20 http://pypi.org:%[1]s/simple/requests/ > index
if curl -fsS --max-time 20 http://other.example:%[1]s/ >/dev/null 2>&1; then echo reached > other; else echo refused > other; fi
if curl -fsS --max-time 5 --noproxy '*' http://127.0.0.1:%[1]s/ >/dev/null 2>&1; then echo reached > direct; else echo refused > direct; fi
cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' ' > interfaces
`, port)
}

// A build with Egress reaches the hosts of its allow list (here pypi's, expanded from
// the package index name) through the proxy its supervisor runs, and nothing else: not a
// host off the list, not the host's network directly; it has no interface but lo, the
// refusals are in its log, and the proxy and its files are gone once it is done.
func TestBuildEgressReachesOnlyItsAllowList(t *testing.T) {
	t.Parallel()
	b, rel := newTestBuilder(t)
	b.egressHosts = map[string]string{"pypi.org": "127.0.0.1", "files.pythonhosted.org": "127.0.0.1", "other.example": "127.0.0.1"}
	port := fakeIndex(t)
	// The network the provider gives a build of an environment with allow_domains =
	// ["api.example.com"] and package_indexes = ["pypi"], in either package_indexes_in.
	_, proxied, hosts, err := packageindex.BuildNetwork(false, []string{"api.example.com"}, []string{"pypi"})
	if err != nil || !proxied {
		t.Fatalf("BuildNetwork: proxied %v, %v", proxied, err)
	}
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-egress", Base: rel, Spec: sandbox.SnapshotSpec{BuildScript: probeScript(port)},
		Egress: &sandbox.BuildEgress{AllowDomains: hosts}})
	st := waitDone(t, b, "snap-egress", 60*time.Second)
	log := b.LogTail("snap-egress")
	requireReady(t, st)
	if got := readLayerFile(t, b, "snap-egress", "usr/local/share/probe/index"); got != "fake index: pypi.org:"+port+" /simple/requests/" {
		t.Errorf("index fetched through the proxy = %q; log:\n%s", got, log)
	}
	if got := readLayerFile(t, b, "snap-egress", "usr/local/share/probe/other"); got != "refused" {
		t.Errorf("a host off the allow list was %s; log:\n%s", got, log)
	}
	if got := readLayerFile(t, b, "snap-egress", "usr/local/share/probe/direct"); got != "refused" {
		t.Errorf("a direct connection to the host was %s; log:\n%s", got, log)
	}
	if got := readLayerFile(t, b, "snap-egress", "usr/local/share/probe/interfaces"); got != "lo" {
		t.Errorf("the build sees interfaces %q, want lo alone", got)
	}
	if !strings.Contains(log, "trueforge egress: refused (not_allowed) plain other.example:"+port) {
		t.Errorf("the refusal is not in the build log:\n%s", log)
	}
	for _, f := range []string{buildEgressDir, buildEgressConfig} {
		if _, err := os.Stat(filepath.Join(b.snapDir("snap-egress"), f)); err == nil {
			t.Errorf("%s left in the snapshot's directory", f)
		}
	}
	// Other tests' builds may run a proxy too; ours has its snapshot's directory in its
	// environment.
	for _, pid := range sandboxtest.ProcessesWith(buildProxyArg) {
		env, _ := os.ReadFile(filepath.Join("/proc", pid, "environ"))
		if strings.Contains(string(env), b.snapDir("snap-egress")) {
			t.Errorf("the build's proxy (pid %s) outlived the build", pid)
		}
	}
}

// BlockNetwork wins over Egress, and a bad allow list fails StartBuild with the field.
func TestBuildEgressBlockedAndBadPatterns(t *testing.T) {
	t.Parallel()
	b, rel := newTestBuilder(t)
	port := fakeIndex(t)
	b.egressHosts = map[string]string{"pypi.org": "127.0.0.1"}
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-egress-blocked", Base: rel, BlockNetwork: true,
		Spec:   sandbox.SnapshotSpec{BuildScript: "if curl -fsS --max-time 5 http://pypi.org:" + port + "/ >/dev/null 2>&1; then exit 1; fi"},
		Egress: &sandbox.BuildEgress{AllowDomains: []string{"pypi.org"}}})
	requireReady(t, waitDone(t, b, "snap-egress-blocked", 30*time.Second))
	err := b.StartBuild(t.Context(), sandbox.BuildRequest{ID: "snap-egress-bad", Base: rel,
		Spec: sandbox.SnapshotSpec{Image: sandbox.PlatformImage}, Egress: &sandbox.BuildEgress{AllowDomains: []string{"https://pypi.org/"}}})
	if err == nil || !strings.Contains(err.Error(), "allow_domains") {
		t.Fatalf("StartBuild with a URL in the allow list: %v", err)
	}
}

// TestUnprivilegedBuildEgress runs the build egress test again as a user without
// privileges (outer user namespace, no id slot, no idmapped socket directory): as root,
// through a copy of this test binary started as that user; otherwise it already ran so.
func TestUnprivilegedBuildEgress(t *testing.T) {
	t.Parallel()
	requireTools(t)
	if os.Geteuid() != 0 {
		t.Skip("skipping: not root, so TestBuildEgressReachesOnlyItsAllowList already ran unprivileged")
	}
	run := asuser.Prepare(t, "local.test")
	out, err := run.Command(sandboxPath, nil, "-test.run=^TestBuildEgressReachesOnlyItsAllowList$", "-test.v").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestBuildEgressReachesOnlyItsAllowList") {
		t.Fatalf("as uid %d: %v\n%s", unprivUID, err, out)
	}
}

// loopbackServer is a TCP server on the host's loopback (addr "127.0.0.1:0" or
// "[::1]:0") that counts the connections it accepts, standing for a service that trusts
// local connections (an MCP server, PostgreSQL). port is "" when the address family is
// not available.
func loopbackServer(t *testing.T, addr string) (port string, accepted func() int64) {
	t.Helper()
	port, accepted, err := nettest.CountingServer(t, addr)
	if err != nil {
		return "", func() int64 { return 0 }
	}
	return port, accepted
}

// TestBuildWithoutAllowListRefusesHostServices: a build of an environment with no allow
// list (no BuildRequest.Egress) does not share the host's network: it has lo alone, and
// its proxy, which admits public hosts, refuses the host's loopback (IPv4 and IPv6) and
// link-local addresses by every route a script has (plain proxy, CONNECT, SOCKS,
// directly), while a public-looking host (a name resolved, for the test, to 127.0.0.2)
// is reached. The loopback servers see no connection and the refusals are in the log.
func TestBuildWithoutAllowListRefusesHostServices(t *testing.T) {
	t.Parallel()
	b, rel := newTestBuilder(t)
	// The test's stand-in for a public host is on 127.0.0.2, exempted by address
	// (egressHosts); 127.0.0.1 and ::1 are not.
	pub := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "public: %s\n", r.Host)
	}))
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("skipping: cannot listen on 127.0.0.2: %v", err)
	}
	pub.Listener = ln
	pub.Start()
	t.Cleanup(pub.Close)
	_, pubPort, _ := net.SplitHostPort(ln.Addr().String())
	b.egressHosts = map[string]string{"public.example": "127.0.0.2"}
	port4, accepted4 := loopbackServer(t, "127.0.0.1:0")
	port6, accepted6 := loopbackServer(t, "[::1]:0")

	// Each probe records "reached" or "refused"; curl's explicit --proxy and
	// --noproxy '' override the NO_PROXY the build gets, which exempts loopback.
	var sb strings.Builder
	fmt.Fprintf(&sb, `mkdir -p /usr/local/share/probe
cd /usr/local/share/probe
probe() { f=$1; shift; if curl -fsS --max-time 10 "$@" >/dev/null 2>>errors; then echo reached > "$f"; else echo refused > "$f"; fi; }
curl -fsS --max-time 20 http://public.example:%s/ > public
probe v4-direct --noproxy '*' http://127.0.0.1:%s/
probe v4-plain --noproxy '' --proxy http://127.0.0.1:3128 http://127.0.0.1:%[2]s/
probe v4-connect --noproxy '' --proxy http://127.0.0.1:3128 --proxytunnel http://127.0.0.1:%[2]s/
probe v4-socks --noproxy '' --socks5-hostname 127.0.0.1:1080 http://127.0.0.1:%[2]s/
probe linklocal --noproxy '' --proxy http://127.0.0.1:3128 http://169.254.169.254/latest/meta-data/
cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' ' > interfaces
`, pubPort, port4)
	if port6 != "" {
		fmt.Fprintf(&sb, `probe v6-plain --noproxy '' --proxy http://127.0.0.1:3128 'http://[::1]:%[1]s/'
probe v6-connect --noproxy '' --proxy http://127.0.0.1:3128 --proxytunnel 'http://[::1]:%[1]s/'
probe v6-compat --noproxy '' --proxy http://127.0.0.1:3128 --proxytunnel 'http://[::127.0.0.1]:%[2]s/'
`, port6, port4)
	}
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-open-net", Base: rel, Spec: sandbox.SnapshotSpec{BuildScript: sb.String()}})
	st := waitDone(t, b, "snap-open-net", 90*time.Second)
	log := b.LogTail("snap-open-net")
	requireReady(t, st)
	if got := readLayerFile(t, b, "snap-open-net", "usr/local/share/probe/public"); got != "public: public.example:"+pubPort {
		t.Errorf("the public host through the proxy = %q; log:\n%s", got, log)
	}
	probes := []string{"v4-direct", "v4-plain", "v4-connect", "v4-socks", "linklocal"}
	if port6 != "" {
		probes = append(probes, "v6-plain", "v6-connect", "v6-compat")
	}
	for _, p := range probes {
		if got := readLayerFile(t, b, "snap-open-net", "usr/local/share/probe/"+p); got != "refused" {
			t.Errorf("probe %s: %s; log:\n%s", p, got, log)
		}
	}
	if got := readLayerFile(t, b, "snap-open-net", "usr/local/share/probe/interfaces"); got != "lo" {
		t.Errorf("the build sees interfaces %q, want lo alone", got)
	}
	if n4, n6 := accepted4(), accepted6(); n4 != 0 || n6 != 0 {
		t.Errorf("the host's loopback servers accepted %d (IPv4) and %d (IPv6) connections from the build", n4, n6)
	}
	for _, want := range []string{
		"the build reaches the network through a proxy that admits every public host",
		"trueforge egress: refused (forbidden_address) plain 127.0.0.1:" + port4,
		"trueforge egress: refused (forbidden_address) tunnel 127.0.0.1:" + port4,
		"trueforge egress: refused (forbidden_address) plain 169.254.169.254:80",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the build log lacks %q:\n%s", want, log)
		}
	}
	if port6 != "" && !strings.Contains(log, "trueforge egress: refused (forbidden_address) plain ::1:"+port6) {
		t.Errorf("the IPv6 loopback refusal is not in the build log:\n%s", log)
	}
}

// TestUnprivilegedBuildWithoutAllowList runs the test above as a user without
// privileges, as TestUnprivilegedBuildEgress does.
func TestUnprivilegedBuildWithoutAllowList(t *testing.T) {
	t.Parallel()
	requireTools(t)
	if os.Geteuid() != 0 {
		t.Skip("skipping: not root, so TestBuildWithoutAllowListRefusesHostServices already ran unprivileged")
	}
	run := asuser.Prepare(t, "local.test")
	out, err := run.Command(sandboxPath, nil, "-test.run=^TestBuildWithoutAllowListRefusesHostServices$", "-test.v").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestBuildWithoutAllowListRefusesHostServices") {
		t.Fatalf("as uid %d: %v\n%s", unprivUID, err, out)
	}
}
