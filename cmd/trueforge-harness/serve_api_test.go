package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// serve refuses plain HTTP off loopback unless told a TLS proxy is in front, and flags
// that need --listen without it.
func TestServeListenRules(t *testing.T) {
	st := harnesstest.NewStore(t)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--listen", "0.0.0.0:8080"}, "--insecure-listen"},
		{[]string{"--listen", ":8080"}, "every interface"},
		{[]string{"--listen", "192.0.2.1:8080"}, "in the clear"},
		{[]string{"--listen", "example.com:8080"}, "Listen on loopback"},
		{[]string{"--listen", "127.0.0.1"}, "host:port"},
		{[]string{"--listen", "127.0.0.1:0", "--tls-cert", "c.pem"}, "go together"},
		{[]string{"--listen", "127.0.0.1:0", "--once"}, "--once"},
		{[]string{"--metrics-public"}, "give --listen"},
		{[]string{"--listen", "127.0.0.1:0", "--trace-url", "https://jaeger.example.com/trace/"}, "--trace-url (TRUEFORGE_TRACE_URL): \"https://jaeger.example.com/trace/\" has no {trace_id}"},
	} {
		_, _, err := run(t, st.Path(), "", append([]string{"serve"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("serve %v: %v; want an error saying %q", tc.args, err, tc.says)
		}
	}
	for _, h := range []string{"127.0.0.1", "localhost", "::1", "[::1]", "127.1.2.3"} {
		if !isLoopback(h) {
			t.Errorf("%s is loopback", h)
		}
	}
	for _, h := range []string{"", "0.0.0.0", "::", "10.0.0.1", "localhost.example.com"} {
		if isLoopback(h) {
			t.Errorf("%s is not loopback", h)
		}
	}
}

// servingAddr starts serve with args in-process and returns the address it serves on and
// the function that stops it (as SIGTERM does) and returns its output and error.
func startServe(t *testing.T, db string, args ...string) (string, func() (string, error)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := newRootCmd()
	out := &sandboxtest.SyncBuffer{}
	cmd.SetOut(out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(append([]string{"--database-url", db, "serve"}, args...))
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	addr := regexp.MustCompile(`on (https?://[0-9.:]+)\n`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := addr.FindStringSubmatch(out.String()); m != nil {
			stopped := false
			stop := func() (string, error) {
				if stopped {
					return out.String(), nil
				}
				stopped = true
				cancel()
				select {
				case err := <-done:
					return out.String(), err
				case <-time.After(60 * time.Second):
					t.Fatal("serve did not stop within a minute")
				}
				return "", nil
			}
			t.Cleanup(func() { _, _ = stop() })
			return m[1], stop
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("serve ended before serving: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve did not say where it serves:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serve --listen serves the API and the web page; a stop cancels the turn it runs,
// records it cancelled, and exits cleanly.
func TestServeHTTPAndGracefulStop(t *testing.T) {
	st := harnesstest.NewStore(t)
	seedServe(t, st)
	harnesstest.AddAgent(t, st, "slow", "", harnesstest.AgentSpec{"model": harnesstest.Script(map[string]any{"text": "late", "delay_ms": 60000})})
	tokenOut, _, err := run(t, st.Path(), "", "users", "add", "alice")
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(tokenOut)
	base, stop := startServe(t, st.Path(), "--listen", "127.0.0.1:0", "--interval", "1h")
	call := func(method, path string, body any) (int, []byte, http.Header) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("Authorization", "Bearer "+token)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b, resp.Header
	}
	if code, body, h := call("GET", "/", nil); code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !bytes.Contains(body, []byte("<")) {
		t.Fatalf("the web page: %d %s %.80s", code, h.Get("Content-Type"), body)
	}
	if code, _, _ := call("GET", "/healthz", nil); code != 200 {
		t.Fatalf("healthz: %d", code)
	}
	code, body, _ := call("POST", "/api/v1/sessions", map[string]any{"agent": "slow"})
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	var s struct{ ID string }
	_ = json.Unmarshal(body, &s)
	if code, body, _ = call("POST", "/api/v1/sessions/"+s.ID+"/messages", map[string]any{"text": "go"}); code != 202 {
		t.Fatalf("message: %d %s", code, body)
	}
	out, err := stop()
	if err != nil {
		t.Fatalf("serve: %v\n%s", err, out)
	}
	if !strings.Contains(out, "cancelling 1 running turns") {
		t.Errorf("serve's output: %s", out)
	}
	runs, _ := st.Runs(context.Background(), s.ID)
	if len(runs) != 1 || runs[0].Status != store.RunCancelled {
		t.Fatalf("the turn after the stop: %+v", runs)
	}
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), time.Second); err == nil {
		t.Fatal("serve still accepts connections after the stop")
	}
}

// With --tls-cert and --tls-key, serve speaks HTTPS and the login cookie is Secure.
func TestServeTLS(t *testing.T) {
	st := harnesstest.NewStore(t)
	seedServe(t, st)
	tokenOut, _, err := run(t, st.Path(), "", "users", "add", "alice")
	if err != nil {
		t.Fatal(err)
	}
	cert, key := selfSigned(t)
	base, _ := startServe(t, st.Path(), "--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key, "--interval", "1h")
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("serving on %s", base)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Post(base+"/api/v1/login", "application/json", strings.NewReader(`{"token": "`+strings.TrimSpace(tokenOut)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(resp.Cookies()) != 1 || !resp.Cookies()[0].Secure {
		t.Fatalf("login over TLS: %d %+v", resp.StatusCode, resp.Cookies())
	}
	if r, err := http.Get(strings.Replace(base, "https://", "http://", 1) + "/healthz"); err == nil && r.StatusCode == 200 {
		t.Fatal("plain HTTP was served on the TLS port")
	}
}

func seedServe(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	must(t, st.CreateSandboxProvider(ctx, store.SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: harnesstest.Owner}))
	if _, _, err := st.ClaimSnapshot(ctx, store.Snapshot{ID: "snap-b", Provider: "local", BuildHash: "h", Spec: "{}"}, "Building", "Failed"); err != nil {
		t.Fatal(err)
	}
	must(t, st.CreateEnvironment(ctx, store.Environment{ID: "e", Name: "py", Provider: "local", Owner: harnesstest.Owner, Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h", SnapshotID: "snap-b"}))
}

// selfSigned writes a certificate for 127.0.0.1 and its key, returning their paths.
func selfSigned(t *testing.T) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	must(t, os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	must(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return cert, keyPath
}
