//go:build unix

package daytona_test

import (
	"syscall"
	"testing"
)

// TestEmulatorUploadModesAsTheDaemons: the emulator's upload is the daemon's os.Create
// whatever the test process's umask (here 0077): a new file is 0644 (0666 less the
// daemon's umask 0022), and an upload over an existing file keeps its mode. Not
// parallel: the umask is the whole process's.
func TestEmulatorUploadModesAsTheDaemons(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	_, c, _ := interactiveSandbox(t)
	ctx := testCtx(t)
	sb, err := c.GetSandbox(ctx, "inter")
	if err != nil {
		t.Fatal(err)
	}
	perms := func() string {
		t.Helper()
		fi, err := c.StatFile(ctx, sb, "/workspace/new.sh")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Permissions
	}
	if err := c.UploadFile(ctx, sb, "/workspace/new.sh", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if got := perms(); got != "0644" {
		t.Fatalf("a new upload: %s; want 0644", got)
	}
	if err := c.SetFileMode(ctx, sb, "/workspace/new.sh", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.UploadFile(ctx, sb, "/workspace/new.sh", []byte("two")); err != nil {
		t.Fatal(err)
	}
	if got := perms(); got != "0755" {
		t.Fatalf("an upload over a 0755 file: %s; want it kept", got)
	}
}
