package egress_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
)

const realToken = "ghp_REALVALUEdoNotLeak0123456789abcdef"

func secretFixture(t *testing.T, opts ...fixtureOpt) *fixture {
	f := newFixture(t, egress.Policy{AllowDomains: []string{"secret.allowed.test", "other.allowed.test", "api.allowed.test"}},
		[]egress.Secret{{Name: "GITHUB_TOKEN", Value: realToken, Hosts: []string{"secret.allowed.test"}}}, opts...)
	f.up.token = func() string { return f.currentValue("GITHUB_TOKEN") }
	return f
}

func (f *fixture) currentValue(name string) string {
	list, _ := f.secrets.source(context.Background())
	for _, s := range list {
		if s.Name == name {
			return s.Value
		}
	}
	return ""
}

func (f *fixture) get(t *testing.T, c *http.Client, host, path string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", f.url(host, path), nil)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s%s: %v", host, path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, string(b)
}

func TestSecretSubstitutedForItsHost(t *testing.T) {
	f := secretFixture(t)
	ph := f.proxy.Env()["GITHUB_TOKEN"]
	if !strings.HasPrefix(ph, egress.PlaceholderPrefix) || strings.Contains(ph, realToken) {
		t.Fatalf("placeholder %q", ph)
	}
	c := f.client(t)
	basic := base64.StdEncoding.EncodeToString([]byte("git:" + ph))
	for name, hdr := range map[string]map[string]string{
		"bearer": {"Authorization": "Bearer " + ph},
		"plain":  {"X-Api-Key": ph},
		"basic":  {"Authorization": "Basic " + basic},
	} {
		resp, body := f.get(t, c, "secret.allowed.test", "/auth", hdr)
		if resp.StatusCode != 200 || body != "authorized\n" {
			t.Fatalf("%s: %d %q", name, resp.StatusCode, body)
		}
		// Terminated with the sandbox's own CA.
		if got := resp.TLS.PeerCertificates[0].Issuer.CommonName; !strings.Contains(got, "sbx-test") {
			t.Errorf("%s: served by %q, want the sandbox CA", name, got)
		}
	}
	var logged bool
	for _, d := range f.log.all() {
		if d.Allowed && d.Mode == "terminate" && d.Path == "/auth" && len(d.Secrets) == 1 && d.Secrets[0] == "GITHUB_TOKEN" {
			logged = true
		}
		if strings.Contains(d.Message, realToken) {
			t.Fatalf("the decision log holds the secret: %+v", d)
		}
	}
	if !logged {
		t.Fatalf("no decision names the substituted secret: %+v", f.log.all())
	}
}

func TestPlaceholderToAnotherHostRefused(t *testing.T) {
	f := secretFixture(t)
	ph := f.proxy.Env()["GITHUB_TOKEN"]
	c := f.client(t)
	for name, hdr := range map[string]map[string]string{
		"bearer": {"Authorization": "Bearer " + ph},
		"basic":  {"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("git:"+ph))},
		"custom": {"X-Exfil": "x" + ph + "y"},
	} {
		resp, _ := f.get(t, c, "other.allowed.test", "/auth", hdr)
		if got := denyReason(t, resp); got != egress.ReasonPlaceholderHost {
			t.Fatalf("%s: reason %q", name, got)
		}
	}
	// In the URL too (never substituted there, but never let out either).
	resp, _ := f.get(t, c, "other.allowed.test", "/whoami?t="+ph, nil)
	if got := denyReason(t, resp); got != egress.ReasonPlaceholderHost {
		t.Fatalf("query: reason %q", got)
	}
	// Over plain http://, even to the secret's own host.
	resp, err := c.Get("http://" + net.JoinHostPort("secret.allowed.test", f.plainUp.port) + "/auth?x=" + ph)
	if err != nil {
		t.Fatal(err)
	}
	if got := denyReason(t, resp); got != egress.ReasonPlaceholderPlain {
		t.Fatalf("plain: reason %q", got)
	}
	if n := len(f.up.requests()) + len(f.plainUp.requests()); n != 0 {
		t.Fatalf("upstreams got %d requests", n)
	}
	// Without a placeholder, the other host is reachable (through termination).
	if resp, body := f.get(t, c, "other.allowed.test", "/whoami", nil); resp.StatusCode != 200 {
		t.Fatalf("other host: %d %q", resp.StatusCode, body)
	}
}

func TestPlaceholderPassesInertWhenConfigured(t *testing.T) {
	f := secretFixture(t, func(c *egress.Config) { c.PassInertPlaceholders = true })
	ph := f.proxy.Env()["GITHUB_TOKEN"]
	resp, body := f.get(t, f.client(t), "other.allowed.test", "/auth", map[string]string{"Authorization": "Bearer " + ph})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("%d %q, want the upstream's 401", resp.StatusCode, body)
	}
	reqs := f.up.requests()
	if len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "Bearer "+ph {
		t.Fatalf("upstream should see the placeholder unchanged: %+v", reqs)
	}
}

// The host a secret goes to is the CONNECT target, never the Host header: a sandbox
// cannot open a tunnel to one host and address the request to another.
func TestSpoofedHostHeaderRefused(t *testing.T) {
	f := secretFixture(t)
	ph := f.proxy.Env()["GITHUB_TOKEN"]
	c := f.client(t)
	for _, spoof := range []string{"evil.test", "secret.allowed.test:" + f.up.port} {
		// Tunnel to other.allowed.test, Host naming secret.allowed.test (and the reverse).
		host := "other.allowed.test"
		if strings.HasPrefix(spoof, "secret") {
			host = "api.allowed.test"
		}
		resp, _ := f.get(t, c, host, "/auth", map[string]string{"Host": spoof, "Authorization": "Bearer " + ph})
		if got := denyReason(t, resp); got != egress.ReasonHostMismatch {
			t.Fatalf("Host %s via %s: reason %q", spoof, host, got)
		}
	}
	if n := len(f.up.requests()); n != 0 {
		t.Fatalf("upstream got %d requests", n)
	}
}

// substituted is a secret fixture, its client and the header that carries GITHUB_TOKEN's
// placeholder, after one request to secret.allowed.test with it succeeded (failing with
// when otherwise): the state live changes to the secrets start from.
func substituted(t *testing.T, when string) (*fixture, *http.Client, map[string]string) {
	t.Helper()
	f := secretFixture(t)
	c := f.client(t)
	auth := map[string]string{"Authorization": "Bearer " + f.proxy.Env()["GITHUB_TOKEN"]}
	if resp, body := f.get(t, c, "secret.allowed.test", "/auth", auth); resp.StatusCode != 200 {
		t.Fatalf("%s: %d %q", when, resp.StatusCode, body)
	}
	return f, c, auth
}

// Rotation reaches the next request of a running sandbox, on the same connection;
// removal stops substitution at once.
func TestRotationAndRemovalWithinOneRequest(t *testing.T) {
	f, c, auth := substituted(t, "before rotation")
	f.secrets.set(egress.Secret{Name: "GITHUB_TOKEN", Value: "ghp_ROTATED_value_42", Hosts: []string{"secret.allowed.test"}})
	if resp, body := f.get(t, c, "secret.allowed.test", "/auth", auth); resp.StatusCode != 200 {
		t.Fatalf("after rotation: %d %q", resp.StatusCode, body)
	}
	reqs := f.up.requests()
	if got := reqs[len(reqs)-1].Header.Get("Authorization"); got != "Bearer ghp_ROTATED_value_42" {
		t.Fatalf("after rotation upstream got %q", got)
	}
	f.secrets.set()
	resp, _ := f.get(t, c, "secret.allowed.test", "/auth", auth)
	if got := denyReason(t, resp); got != egress.ReasonSecretRemoved {
		t.Fatalf("after removal: reason %q", got)
	}
	if n := len(f.up.requests()); n != 2 {
		t.Fatalf("upstream got %d requests, want 2", n)
	}
}

// A secret added after the sandbox was created never reaches it; a new sandbox gets it.
func TestSecretAddedLaterReachesOnlyNewSandboxes(t *testing.T) {
	f := secretFixture(t)
	f.secrets.set(
		egress.Secret{Name: "GITHUB_TOKEN", Value: realToken, Hosts: []string{"secret.allowed.test"}},
		egress.Secret{Name: "NEW_TOKEN", Value: "new-secret-value", Hosts: []string{"secret.allowed.test"}},
	)
	if _, ok := f.proxy.Env()["NEW_TOKEN"]; ok {
		t.Fatal("a secret added later appeared in a running sandbox's environment")
	}
	p2, err := egress.New(context.Background(), egress.Config{SandboxID: "sbx-2", Secrets: f.secrets.source, SystemRoots: []byte{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if ph := p2.Env()["NEW_TOKEN"]; !strings.HasPrefix(ph, egress.PlaceholderPrefix) || ph == f.proxy.Env()["GITHUB_TOKEN"] || ph == p2.Env()["GITHUB_TOKEN"] {
		t.Fatalf("new sandbox placeholder %q", ph)
	}
	if p2.Env()["GITHUB_TOKEN"] == f.proxy.Env()["GITHUB_TOKEN"] {
		t.Fatal("placeholders must differ between sandboxes")
	}
}

func TestSandboxSideHoldsNoSecretValue(t *testing.T) {
	f := secretFixture(t)
	for k, v := range f.proxy.Env() {
		if strings.Contains(v, realToken) || strings.Contains(k, realToken) {
			t.Fatalf("env %s holds the secret", k)
		}
	}
	for name, b := range f.proxy.Files() {
		if bytes.Contains(b, []byte(realToken)) || bytes.Contains(b, []byte("PRIVATE KEY")) {
			t.Fatalf("file %s holds the secret or a private key", name)
		}
	}
}

func TestBlockAllMakesSecretsInert(t *testing.T) {
	f := newFixture(t, egress.Policy{BlockAll: true}, []egress.Secret{{Name: "GITHUB_TOKEN", Value: realToken, Hosts: []string{"secret.allowed.test"}}})
	if _, ok := f.proxy.Env()["GITHUB_TOKEN"]; ok {
		t.Fatal("block_all sandbox got a secret placeholder")
	}
}

func TestStateRestoresCAAndPlaceholders(t *testing.T) {
	f := secretFixture(t)
	st := f.proxy.State()
	p2, err := egress.New(context.Background(), egress.Config{SandboxID: "sbx-test", Secrets: f.secrets.source, State: &st, SystemRoots: []byte{}})
	if err != nil {
		t.Fatal(err)
	}
	if p2.Env()["GITHUB_TOKEN"] != f.proxy.Env()["GITHUB_TOKEN"] {
		t.Fatal("restored proxy has another placeholder")
	}
	if !bytes.Contains(f.proxy.Files()[egress.FileCABundle], p2.Files()[egress.FileCABundle]) {
		t.Fatal("restored proxy has another CA")
	}
}

// A protocol upgrade (WebSocket and the like) passes through a terminated connection
// after its headers had the placeholder replaced.
func TestUpgradeThroughTermination(t *testing.T) {
	f := secretFixture(t)
	ph := f.proxy.Env()["GITHUB_TOKEN"]
	resp, c, _ := f.connect(t, "secret.allowed.test:"+f.up.port)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "secret.allowed.test", RootCAs: f.sandboxRoots(t)})
	fmt.Fprintf(tc, "GET /ws HTTP/1.1\r\nHost: secret.allowed.test:%s\r\nConnection: Upgrade\r\nUpgrade: echo\r\nAuthorization: Bearer %s\r\n\r\n", f.up.port, ph)
	br := bufio.NewReader(tc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	fmt.Fprintf(tc, "ping\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "echo: ping\n" {
		t.Fatalf("after the upgrade: %q %v", line, err)
	}
}

// The upstream of a terminated connection is verified normally: one whose certificate
// the proxy does not trust never sees the request, let alone the secret.
func TestTerminatedUpstreamIsVerified(t *testing.T) {
	f := secretFixture(t, func(c *egress.Config) { c.RootCAs = x509.NewCertPool() })
	ph := f.proxy.Env()["GITHUB_TOKEN"]
	resp, _ := f.get(t, f.client(t), "secret.allowed.test", "/auth", map[string]string{"Authorization": "Bearer " + ph})
	if resp.StatusCode != http.StatusBadGateway || denyReason(t, resp) != egress.ReasonUpstreamFailed {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if n := len(f.up.requests()); n != 0 {
		t.Fatalf("an unverified upstream got %d requests", n)
	}
}

// A secret's host list is read live too: narrowing it stops substitution for the host
// on the next request.
func TestSecretHostsChangeApplyNextRequest(t *testing.T) {
	f, c, auth := substituted(t, "before")
	f.secrets.set(egress.Secret{Name: "GITHUB_TOKEN", Value: realToken, Hosts: []string{"other.allowed.test"}})
	resp, _ := f.get(t, c, "secret.allowed.test", "/auth", auth)
	if got := denyReason(t, resp); got != egress.ReasonPlaceholderHost {
		t.Fatalf("after narrowing: %q", got)
	}
	if resp, body := f.get(t, c, "other.allowed.test", "/auth", auth); resp.StatusCode != 200 {
		t.Fatalf("new host: %d %q", resp.StatusCode, body)
	}
}
