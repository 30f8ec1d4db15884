//go:build linux

package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// helperEnv makes the test binary act as a short-lived caller of the builder (see
// runHelper) instead of running tests: it proves that builds outlive their caller and lets
// a build start as another user.
const helperEnv = "TRUEFORGE_LOCAL_TEST_HELPER"

// uniq is appended to the sleep durations tests look for, so that the same test running
// in another test process (the unprivileged run) cannot be mistaken for this one's.
var uniq = strconv.Itoa(os.Getpid())

func TestMain(m *testing.M) {
	probe := os.Getenv(reexecProbeEnv) // TestImportDoesNotDispatch
	if probe == "import" {
		reportNotReexeced()
	}
	// The runtime and the builder re-execute this test binary as their helpers.
	ReexecMain()
	if probe != "" {
		reportNotReexeced()
	}
	if os.Getenv(ownerEnv) != "" {
		if err := runOwner(); err != nil {
			fmt.Fprintln(os.Stderr, "owner:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(helperEnv) != "" {
		if err := runHelper(); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runHelper prepares the release in the given root, starts one build on it and exits
// without waiting for the build.
func runHelper() error {
	b, err := NewBuilder(os.Getenv("HELPER_ROOT"))
	if err != nil {
		return err
	}
	ctx := context.Background()
	rel, err := b.PrepareRelease(ctx)
	if err != nil {
		return err
	}
	return b.StartBuild(ctx, sandbox.BuildRequest{
		ID:   os.Getenv("HELPER_ID"),
		Base: rel,
		Spec: sandbox.SnapshotSpec{Image: sandbox.PlatformImage, BuildScript: os.Getenv("HELPER_SCRIPT")},
	})
}

func helperCmd(bin, root, id, script string) *exec.Cmd {
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append([]string{"PATH=" + sandboxPath}, helperEnvOf(root, id, script)...)
	return cmd
}

// helperEnvOf is the environment that makes the test binary a build helper.
func helperEnvOf(root, id, script string) []string {
	return []string{helperEnv + "=1", "HELPER_ROOT=" + root, "HELPER_ID=" + id, "HELPER_SCRIPT=" + script}
}

func requireTools(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"bwrap", "unshare"} {
		if _, err := findTool(tool); err != nil {
			t.Skipf("skipping: %s is not installed (local builds need bubblewrap and util-linux)", tool)
		}
	}
}

// requireHostTools skips t unless the host's /usr/bin has each of tools: sandboxes see
// the host's /usr, so that is where a probe's python3 or curl comes from.
func requireHostTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := os.Stat("/usr/bin/" + tool); err != nil {
			t.Skipf("skipping: the probe needs %s (/usr/bin/%s)", tool, tool)
		}
	}
}

// newTestBuilder returns a builder on a fresh root with its release prepared.
func newTestBuilder(t testing.TB) (*Builder, string) {
	t.Helper()
	requireTools(t)
	b, err := NewBuilder(filepath.Join(t.TempDir(), "local-backend"))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := b.PrepareRelease(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Whatever a test leaves running is stopped and removed.
	t.Cleanup(func() {
		entries, _ := os.ReadDir(b.snapshotsDir())
		for _, e := range entries {
			_ = b.DeleteSnapshot(context.Background(), e.Name())
		}
	})
	return b, rel
}

func startBuild(t *testing.T, b *Builder, req sandbox.BuildRequest) {
	t.Helper()
	if req.Spec.Image == "" {
		req.Spec.Image = sandbox.PlatformImage
	}
	if err := b.StartBuild(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

// waitDone polls until the build is no longer Building.
func waitDone(t *testing.T, b *Builder, id string, limit time.Duration) sandbox.BuildState {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		st, err := b.BuildState(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != sandbox.StatusBuilding {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("build %s still Building after %s; log:\n%s", id, limit, st.LogTail)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func requireReady(t *testing.T, st sandbox.BuildState) {
	t.Helper()
	if st.Status != sandbox.StatusReady {
		t.Fatalf("status %s (%s), want Ready; log:\n%s", st.Status, st.Reason, st.LogTail)
	}
}

func readLayerFile(t *testing.T, b *Builder, id, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.layerDir(id), rel))
	if err != nil {
		t.Fatalf("layer of %s: %v", id, err)
	}
	return strings.TrimSpace(string(data))
}

// playgroundDir is a directory of the playground snapshot that the sandbox user owns,
// with a file and two non-empty directories in its layer: what a sandbox changes there
// (removing a layer's file or directory) needs whiteouts and opaque directories. As root
// nothing else outside the workspace is the sandbox user's.
const playgroundDir = "/opt/playground"

// playground builds the playground snapshot on base and returns its id.
func playground(t *testing.T, r *Runtime, base string) string {
	t.Helper()
	id := "playground-" + uniq
	script := `
mkdir -p ` + playgroundDir + `/one ` + playgroundDir + `/two
echo h > ` + playgroundDir + `/hostname; echo 1 > ` + playgroundDir + `/one/a; echo 2 > ` + playgroundDir + `/two/b
`
	if r.b.ids != nil {
		// Unprivileged, a build maps only one id: its files are the sandbox user's anyway.
		script += "chown -R 1000:1000 " + playgroundDir + "\n"
	}
	startBuild(t, r.b, sandbox.BuildRequest{ID: id, Base: base, Spec: sandbox.SnapshotSpec{BuildScript: script}})
	requireReady(t, waitDone(t, r.b, id, 60*time.Second))
	return id
}

// etcOwner is how /etc/passwd's owner reads inside a sandbox: root's as root (the id
// slot's root); unprivileged, the host user's files are the sandbox user's.
func etcOwner(r *Runtime) string {
	if r.b.ids != nil {
		return "0 0"
	}
	return "1000 1000"
}

// egressHook is a sandbox's egress hook on proxy p, as the harness makes it
// (sandboxnet): the socket p listens on, the netd helper and p's files.
func egressHook(p *egress.Proxy, sock, helper string) *sandbox.Egress {
	return &sandbox.Egress{Socket: sock, Helper: helper, Files: p.Files()}
}

// unguessable is a secret value that starts with prefix and that nothing in a sandbox
// could guess, for tests that look for it where it must not be.
func unguessable(prefix string) string {
	rnd := make([]byte, 16)
	_, _ = rand.Read(rnd)
	return prefix + hex.EncodeToString(rnd)
}
