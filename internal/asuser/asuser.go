// Package asuser runs a copy of the running test binary as an unprivileged user, so
// that a test run as root also covers what a user without privileges sees (the local
// backend's sandboxes and builds, the demo's sandbox path).
//
// The user is the account scripts/test.sh creates (trueforge-test, passed in
// TRUEFORGE_TEST_UID), else nobody (65534). A uid needs no passwd entry to be used
// through SysProcAttr.Credential, so a plain `go test` works too.
package asuser

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// UID is the unprivileged user's uid (and gid).
func UID() uint32 {
	if v, err := strconv.ParseUint(os.Getenv("TRUEFORGE_TEST_UID"), 10, 32); err == nil && v != 0 {
		return uint32(v)
	}
	return 65534
}

// Run is a copy of the test binary that the user can run, in a directory it can reach.
type Run struct {
	UID uint32
	// Base is the directory of the copy (mode 0755, root's); removed after the test.
	Base string
	// Home is the user's own directory under Base (mode 0700), its HOME and TMPDIR.
	Home string
	// Bin is the copy of the test binary.
	Bin string
}

// Prepare skips t unless the user can create user namespaces (unshare -Urm), then
// copies the test binary into a fresh directory under os.TempDir (not t.TempDir, whose
// parents are private to root) as name.
func Prepare(t testing.TB, name string) *Run {
	t.Helper()
	r := &Run{UID: UID()}
	probe := exec.Command("unshare", "-Urm", "true")
	probe.SysProcAttr = r.credential()
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("skipping: unprivileged user namespaces are not available on this host (unshare -Urm as uid %d: %v: %s)", r.UID, err, out)
	}
	// Short names: tests under Home bind unix sockets, whose paths may not pass 107 bytes.
	base, err := os.MkdirTemp("", "trueforge-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	r.Base, r.Home, r.Bin = base, filepath.Join(base, "tmp"), filepath.Join(base, name)
	for _, step := range []error{os.Chmod(base, 0o755), os.Mkdir(r.Home, 0o700), os.Chown(r.Home, int(r.UID), int(r.UID))} {
		if step != nil {
			t.Fatal(step)
		}
	}
	self, err := os.Executable()
	if err == nil {
		err = link(self, r.Bin)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// link puts the executable src at dst for the user: a hard link when src is on the same
// file system and runnable by others, else a copy (Install). A link writes nothing, and a
// copy just written can be "text file busy" for a moment: a process that another test
// forks while the copy is open holds its write descriptor until it execs
// (golang.org/issue/22315), and an exec of the copy then fails with ETXTBSY.
func link(src, dst string) error {
	if fi, err := os.Stat(src); err == nil && fi.Mode().Perm()&0o005 == 0o005 && os.Link(src, dst) == nil {
		return nil
	}
	return Install(src, dst)
}

// Command runs the copy as the user in Base with args and an environment of PATH (path),
// HOME and TMPDIR (both Home) and extra.
func (r *Run) Command(path string, extra []string, args ...string) *exec.Cmd {
	cmd := exec.Command(r.Bin, args...)
	cmd.Dir = r.Base
	cmd.Env = append([]string{"PATH=" + path, "TMPDIR=" + r.Home, "HOME=" + r.Home}, extra...)
	cmd.SysProcAttr = r.credential()
	return cmd
}

// Install copies the executable src to dst (which must not exist), mode 0755 whatever
// the umask: how a binary built by root is put where the user can run it.
func Install(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, 0o755)
}

func (r *Run) credential() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: r.UID, Gid: r.UID}}
}
