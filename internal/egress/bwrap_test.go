package egress_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/egress/wire"
)

// bwrapLaunch is how a runtime can start a sandbox with egress: a fresh network namespace
// prepared by "netd -prepare" (lo up, port 53 bindable by the sandbox user), then
// bubblewrap as in the local runtime (every namespace, uid 1000, no capabilities) sharing
// that namespace, with the socket's directory (read-only), netd, the Files and resolv.conf bound in, and netd
// started as the sandbox user before the command.
const bwrapLaunch = `set -e
"$EGRESS_NETD" -prepare
exec bwrap --die-with-parent --new-session --unshare-all --share-net --uid 1000 --gid 1000 --cap-drop ALL \
	--ro-bind / / --proc /proc --dev /dev --tmpfs /tmp --tmpfs /run --dir /run/trueforge \
	--ro-bind "$(dirname "$EGRESS_SOCKET")" ` + wire.SocketDir + ` \
	--ro-bind "$EGRESS_NETD" ` + wire.HelperPath + ` \
	--ro-bind "$EGRESS_FILES/ca-bundle.pem" /run/trueforge/ca-bundle.pem \
	--ro-bind "$EGRESS_FILES/resolv.conf" /etc/resolv.conf \
	-- sh -c '` + wire.HelperPath + ` -ready /tmp/netd.ready 2>/tmp/netd.log &
i=0; while [ ! -e /tmp/netd.ready ]; do i=$((i+1)); [ $i -lt 500 ] || { cat /tmp/netd.log >&2; exit 99; }; sleep 0.01; done
exec "$@"' sh "$@"
`

// The whole path as the local runtime would set it up: the sandbox user (no
// capabilities) gets DNS from netd and reaches allowed hosts only through the proxy,
// with the secret substituted on the way out.
func TestBubblewrapSandboxWithEgress(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root for unshare and bubblewrap, as the local runtime does")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bubblewrap is missing; run scripts/deps.sh")
	}
	f := secretFixture(t)
	run := func(argv ...string) (string, string, int) {
		r := f.unshare(t, []string{"-Urn", "--", "sh", "-c", bwrapLaunch, "sh"}, append([]string{"PATH=" + os.Getenv("PATH"), "HOME=/tmp"}, f.proxyEnv()...), argv...)
		return r.stdout, r.stderr, r.code
	}
	script := `import json, socket, sys, urllib.request
addr = socket.gethostbyname("secret.allowed.test")
req = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + __import__("os").environ["GITHUB_TOKEN"]})
print(addr, urllib.request.urlopen(req, timeout=20).read().decode().strip())
`
	out, errs, code := run("sh", "-c", `id -u; grep -h '^CapEff' /proc/self/status; python3 -c "$1" "$2"; curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" "$2"`, "sh", script, f.url("secret.allowed.test", "/auth"))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 4 || lines[0] != "1000" || !strings.HasSuffix(lines[1], "0000000000000000") ||
		!strings.HasPrefix(lines[2], "198.18.") || !strings.HasSuffix(lines[2], " authorized") || lines[3] != "authorized" {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	out, errs, _ = run("curl", "-sS", f.url("evil.test", "/"))
	if !strings.Contains(out+errs, "403") {
		t.Fatalf("denied host: stdout %s stderr %s", out, errs)
	}
	if n := f.resolver.count("evil.test"); n != 0 {
		t.Fatalf("the proxy resolved a refused name %d times", n)
	}
	if !f.log.has("evil.test", egress.ReasonNotAllowed) {
		t.Fatalf("no refusal logged: %+v", f.log.all())
	}
}
