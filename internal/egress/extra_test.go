package egress_test

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
)

// netd must run in any sandbox image: a static binary with no interpreter.
func TestNetdIsStatic(t *testing.T) {
	f, err := elf.Open(netdBinary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("trueforge-netd is dynamically linked (%v); build it with CGO_ENABLED=0", p.Type)
		}
	}
}

// In a sandbox with secrets, plain HTTP inside a CONNECT tunnel is carried request by
// request like http:// through the proxy.
func TestPlainHTTPInTunnelOfSandboxWithSecrets(t *testing.T) {
	f := secretFixture(t)
	ph := f.proxy.Env()["GITHUB_TOKEN"]
	do := func(host, hostHeader, auth string) *http.Response {
		resp, c, br := f.connect(t, host+":"+f.plainUp.port)
		if resp.StatusCode != 200 {
			t.Fatalf("CONNECT %s: %d", host, resp.StatusCode)
		}
		fmt.Fprintf(c, "GET /auth HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\n\r\n", hostHeader, auth)
		r, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if got := denyReason(t, do("secret.allowed.test", "secret.allowed.test", "Bearer "+ph)); got != egress.ReasonPlaceholderPlain {
		t.Fatalf("placeholder over plain http: %q", got)
	}
	if got := denyReason(t, do("api.allowed.test", "evil.test", "none")); got != egress.ReasonHostMismatch {
		t.Fatalf("Host mismatch: %q", got)
	}
	if n := len(f.plainUp.requests()); n != 0 {
		t.Fatalf("upstream got %d requests", n)
	}
	r := do("api.allowed.test", "api.allowed.test", "none")
	r.Body.Close()
	if r.StatusCode != http.StatusUnauthorized || len(f.plainUp.requests()) != 1 {
		t.Fatalf("plain request: %d, upstream saw %d", r.StatusCode, len(f.plainUp.requests()))
	}
}

// Close cuts open tunnels too, so a replaced sandbox keeps nothing of the old policy.
func TestCloseCutsOpenTunnels(t *testing.T) {
	f := newFixture(t, egress.Policy{AllowDomains: []string{"api.allowed.test"}}, nil)
	resp, c, _ := f.connect(t, "api.allowed.test:"+f.plainUp.port)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, c); done <- err }()
	f.proxy.Close()
	select {
	case <-done: //nolint:errcheck // only that the copy ended matters
	case <-time.After(5 * time.Second):
		t.Fatal("tunnel still open after Close")
	}
}

// Each sandbox has its own CA: a leaf minted for one is not trusted by another.
func TestEachSandboxHasItsOwnCA(t *testing.T) {
	a, err := egress.New(context.Background(), egress.Config{SandboxID: "a", SystemRoots: []byte{}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := egress.New(context.Background(), egress.Config{SandboxID: "b", SystemRoots: []byte{}})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.Files()[egress.FileCABundle], b.Files()[egress.FileCABundle]) {
		t.Fatal("two sandboxes share a CA")
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]egress.Config{
		"star":         {Policy: egress.Policy{AllowDomains: []string{"*"}}},
		"tld wildcard": {Policy: egress.Policy{AllowDomains: []string{"ok.example", "*.com"}}},
		"url":          {Policy: egress.Policy{AllowDomains: []string{"https://x.example"}}},
		"secret name": {Secrets: func(context.Context) ([]egress.Secret, error) {
			return []egress.Secret{{Name: "NOT-A-VAR", Value: "v", Hosts: []string{"x.example"}}}, nil
		}},
	} {
		if _, err := egress.New(context.Background(), cfg); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// One sandbox cannot hold more than MaxTunnels tunnels open.
func TestMaxTunnels(t *testing.T) {
	f := newFixture(t, egress.Policy{AllowDomains: []string{"api.allowed.test"}}, nil, func(c *egress.Config) { c.MaxTunnels = 2 })
	target := "api.allowed.test:" + f.plainUp.port
	for i := 0; i < 2; i++ {
		if resp, _, _ := f.connect(t, target); resp.StatusCode != 200 {
			t.Fatalf("tunnel %d: %d", i, resp.StatusCode)
		}
	}
	resp, _, _ := f.connect(t, target)
	if resp.StatusCode != http.StatusTooManyRequests || denyReason(t, resp) != egress.ReasonTooManyTunnels {
		t.Fatalf("third tunnel: %d", resp.StatusCode)
	}
}

func TestJSONLinesSink(t *testing.T) {
	var buf bytes.Buffer
	f := newFixture(t, egress.Policy{AllowDomains: []string{"api.allowed.test"}}, nil, func(c *egress.Config) { c.Log = egress.JSONLines(&buf) })
	resp, _, _ := f.connect(t, "evil.test:443")
	denyReason(t, resp)
	var d egress.Decision
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &d); err != nil || d.Allowed || d.Reason != egress.ReasonNotAllowed || d.Host != "evil.test" || d.Sandbox != "sbx-test" {
		t.Fatalf("log %q: %+v %v", buf.String(), d, err)
	}
}

// Plain-http requests count too: a sandbox cannot hold more than MaxConns connections to
// its proxy, whatever they carry (here, requests hanging on a slow upstream), and a
// freed slot is usable again.
func TestMaxConns(t *testing.T) {
	f := newFixture(t, egress.Policy{AllowDomains: []string{"api.allowed.test"}}, nil, func(c *egress.Config) { c.MaxConns = 2 })
	dial := func() net.Conn {
		c, err := net.Dial("unix", f.socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// Two connections that send nothing yet hold both slots.
	a, _ := dial(), dial()
	third := dial()
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	if err != nil {
		t.Fatalf("third connection: %v", err)
	}
	if resp.StatusCode != http.StatusTooManyRequests || denyReason(t, resp) != egress.ReasonTooManyConns {
		t.Fatalf("third connection: %d", resp.StatusCode)
	}
	a.Close()
	// The slot is free again once the proxy sees the close.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := dial()
		fmt.Fprintf(c, "GET http://api.allowed.test:%s/whoami HTTP/1.1\r\nHost: api.allowed.test:%s\r\n\r\n", f.plainUp.port, f.plainUp.port)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil && resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot after a close: %v %v", resp, err)
		}
		c.Close()
		time.Sleep(20 * time.Millisecond)
	}
}
