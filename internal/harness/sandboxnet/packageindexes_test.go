package sandboxnet_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sandboxnet"
	"github.com/trueforge/terraform-provider-trueforge/internal/packageindex"
)

// loopbackResolver resolves every name to 127.0.0.1, where the fake index listens.
type loopbackResolver struct{}

func (loopbackResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// fetchThrough asks the proxy listening at sock for url, as netd carries a sandbox's
// plain HTTP request; it returns the status and, when refused, the reason.
func fetchThrough(t *testing.T, sock, target string) (int, string) {
	t.Helper()
	proxyURL, _ := url.Parse("http://egress.sock")
	client := &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(proxyURL),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	resp, err := client.Get(target)
	if err != nil {
		t.Fatalf("GET %s through the proxy: %v", target, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get(egress.DenyHeader)
}

// A sandbox of an environment with package_indexes = ["pypi"] reaches the index (a fake
// one on loopback, reached through the proxy's test hooks) only when package_indexes_in
// is "build_and_sandbox"; with "build" (and by default) it does not, and a host on
// neither list is refused either way. What the sandbox got is recorded with its egress
// state, so a proxy recreated later enforces the same list.
func TestPackageIndexesReachSandboxesOnlyWhenAskedTo(t *testing.T) {
	index := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "fake index %s", r.Host)
	}))
	defer index.Close()
	port := index.Listener.Addr().(*net.TCPAddr).Port
	pypi := fmt.Sprintf("http://pypi.org:%d/simple/requests/", port)
	files := fmt.Sprintf("http://files.pythonhosted.org:%d/packages/x.whl", port)
	other := fmt.Sprintf("http://other.example:%d/", port)

	for _, c := range []struct {
		in         string
		pypiStatus int
	}{
		{"", http.StatusForbidden},
		{packageindex.InBuild, http.StatusForbidden},
		{packageindex.InBuildAndSandbox, http.StatusOK},
	} {
		t.Run("in="+c.in, func(t *testing.T) {
			st, env, _ := fixture(t)
			ctx := context.Background()
			env.Settings.PackageIndexes, env.Settings.PackageIndexesIn = []string{"pypi"}, c.in
			x := sandboxnet.New(sandboxnet.Config{Store: st, Dir: filepath.Join(t.TempDir(), "egress"), Helper: fakeHelper(t),
				Resolver: loopbackResolver{}, AllowAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}})
			defer x.Close()
			_, eg, err := x.Attach(ctx, "s-1", "tf-s-1-1", env)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range []string{pypi, files} {
				code, reason := fetchThrough(t, eg.Socket, u)
				if code != c.pypiStatus {
					t.Errorf("GET %s: %d (%s), want %d", u, code, reason, c.pypiStatus)
				}
				if code == http.StatusForbidden && reason != egress.ReasonNotAllowed {
					t.Errorf("GET %s refused for %q, want %q", u, reason, egress.ReasonNotAllowed)
				}
			}
			if code, reason := fetchThrough(t, eg.Socket, other); code != http.StatusForbidden || reason != egress.ReasonNotAllowed {
				t.Errorf("GET %s: %d (%s), want refused as not allowed", other, code, reason)
			}
			rec, err := st.GetSandboxEgress(ctx, "tf-s-1-1")
			if err != nil {
				t.Fatal(err)
			}
			want := "api.example.com"
			if c.in == packageindex.InBuildAndSandbox {
				want = "api.example.com,files.pythonhosted.org,pypi.org"
			}
			if got := strings.Join(rec.AllowDomains, ","); got != want {
				t.Errorf("recorded allow list %s, want %s", got, want)
			}
		})
	}
}

// An environment without allow_domains admits every public host; naming package indexes
// does not narrow it to the indexes, in either mode.
func TestPackageIndexesNeverNarrowAnOpenEnvironment(t *testing.T) {
	st, env, _ := fixture(t)
	ctx := context.Background()
	env.AllowDomains = nil
	env.Settings.PackageIndexes, env.Settings.PackageIndexesIn = []string{"pypi"}, packageindex.InBuildAndSandbox
	x := sandboxnet.New(sandboxnet.Config{Store: st, Dir: filepath.Join(t.TempDir(), "egress"), Helper: fakeHelper(t)})
	defer x.Close()
	if _, _, err := x.Attach(ctx, "s-1", "tf-s-1-1", env); err != nil {
		t.Fatal(err)
	}
	rec, err := st.GetSandboxEgress(ctx, "tf-s-1-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.AllowDomains) != 0 {
		t.Fatalf("recorded allow list %v; want none (every public host)", rec.AllowDomains)
	}
}
