//go:build linux

package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/asuser"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// unprivUID is the unprivileged user the sandbox tests run as again when they run as
// root (see asuser).
var unprivUID = asuser.UID()

const unprivilegedScript = `
echo hi > /usr/local/bin/hello
echo bar > /etc/foo.conf
rm /etc/hostname
test "$(id -u)" = 0
`

// TestUnprivilegedBuild runs the whole builder (release, detached build) as a user
// without privileges: as root, through a copy of this test binary started as that user;
// otherwise directly.
func TestUnprivilegedBuild(t *testing.T) {
	t.Parallel()
	requireTools(t)
	if os.Geteuid() != 0 {
		b, rel := newTestBuilder(t)
		startBuild(t, b, sandbox.BuildRequest{ID: "snap-unpriv", Base: rel, Spec: sandbox.SnapshotSpec{BuildScript: unprivilegedScript}})
		requireReady(t, waitDone(t, b, "snap-unpriv", 20*time.Second))
		checkUnprivilegedLayer(t, b)
		return
	}
	run := asuser.Prepare(t, "local.test")
	root := filepath.Join(run.Home, "local-backend")
	cmd := run.Command(sandboxPath, helperEnvOf(root, "snap-unpriv", unprivilegedScript), "-test.run=^$")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helper as uid %d: %v\n%s", unprivUID, err, out)
	}

	b, err := NewBuilder(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.DeleteSnapshot(context.Background(), "snap-unpriv") })
	requireReady(t, waitDone(t, b, "snap-unpriv", 20*time.Second))
	checkUnprivilegedLayer(t, b)
	info, err := os.Stat(filepath.Join(b.layerDir("snap-unpriv"), "etc", "foo.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); !ok || st.Uid != unprivUID {
		t.Errorf("layer file owned by %v, want uid %d", info.Sys(), unprivUID)
	}
}

func checkUnprivilegedLayer(t *testing.T, b *Builder) {
	t.Helper()
	if got := readLayerFile(t, b, "snap-unpriv", "usr/local/bin/hello"); got != "hi" {
		t.Errorf("usr/local/bin/hello = %q", got)
	}
	if got := readLayerFile(t, b, "snap-unpriv", "etc/foo.conf"); got != "bar" {
		t.Errorf("etc/foo.conf = %q", got)
	}
	if info, err := os.Lstat(filepath.Join(b.layerDir("snap-unpriv"), "etc", "hostname")); err != nil || info.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("no whiteout for etc/hostname: %v", err)
	}
}

// unprivilegedTests are the runtime tests TestUnprivilegedRuntime runs again as the unprivileged user:
// the attacks, the limits (enforced through rlimits there), lifecycle and egress.
const unprivilegedTests = "^(TestExecBasics|TestAttack.*|TestSeccomp|TestStopStart|TestEndlessOutputCapped|TestEndlessLoopTimeout|TestLimits.*|TestArchiveRestore|TestArchiveRestoreSparse|TestEgressHook|TestEgressResolvConfSymlink|TestEgressEndToEnd|TestEgressSurvivesANewListener|TestEgressSocketDirChecked|TestLost|TestOwnerCrash|TestFiles|TestConcurrentSandboxes|TestVolumeSharedBetweenSandboxes|TestVolumeSubpathEscape|TestVolumeSetuidFileUnreachableFromHost|TestVolumeFiles.*)$"

// TestUnprivilegedRuntime runs the key runtime tests as a user without privileges: as
// root, through a copy of this test binary started as unprivUID (with its own TMPDIR);
// otherwise they already ran that way.
func TestUnprivilegedRuntime(t *testing.T) {
	t.Parallel()
	requireTools(t)
	if os.Geteuid() != 0 {
		t.Skip("skipping: not root, so every runtime test of this run is already unprivileged")
	}
	run := asuser.Prepare(t, "local.test")
	var env []string
	mustPass := []string{"TestAttackHostFiles", "TestAttackHostProcesses", "TestAttackNetworkBlocked", "TestAttackOtherSandbox",
		"TestAttackSymlinkDownload", "TestAttackForkBomb", "TestAttackMemoryHog", "TestAttackDiskFill", "TestAttackInit", "TestAttackInitSignals",
		"TestAttackDeleteLeavesNothing", "TestEndlessOutputCapped", "TestEndlessLoopTimeout", "TestStopStart", "TestOwnerCrash",
		"TestVolumeSharedBetweenSandboxes", "TestVolumeSubpathEscape", "TestVolumeSetuidFileUnreachableFromHost",
		"TestVolumeFilesInWorkspace", "TestVolumeFilesSymlinkEscape"}
	if _, err := exec.LookPath("go"); err == nil {
		// The helpers are built here, as root, and copied where unprivUID can run them.
		for _, h := range []struct{ env, src, name string }{
			{egressHelperEnv, buildEgressHelper(t), "egresshelper"},
			{netdEnv, buildNetd(t), "trueforge-netd"},
			{harnessHelperEnv, buildHarnessHelper(t), "trueforge-harness"},
		} {
			dst := filepath.Join(run.Base, h.name)
			if err := asuser.Install(h.src, dst); err != nil {
				t.Fatal(err)
			}
			env = append(env, h.env+"="+dst)
		}
		mustPass = append(mustPass, "TestEgressHook", "TestEgressResolvConfSymlink", "TestEgressEndToEnd",
			"TestEgressSurvivesANewListener", "TestEgressSocketDirChecked", "TestAttackEgressSocketDir", "TestAttackNetdTakeover",
			"TestAttackNetdTakeover/harness", "TestAttackNetdTakeover/trueforge-netd")
	}
	cmd := run.Command(sandboxPath, env, "-test.run="+unprivilegedTests, "-test.count=1", "-test.v", "-test.timeout=5m")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("runtime tests as uid %d: %v\n%s", unprivUID, err, out)
	}
	for _, name := range mustPass {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass as uid %d", name, unprivUID)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
		return
	}
	var summary []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "--- ") {
			summary = append(summary, l)
		}
	}
	t.Logf("as uid %d:\n%s", unprivUID, strings.Join(summary, "\n"))
}
