//go:build linux

package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
)

// A sandbox swaps a symlink to a host file in for a regular file while it is being
// downloaded (here the host does the swapping, as fast as it can, to hit the window
// between ReadFile's check and its open): every read gets the regular file or
// ErrNotRegular, never the host file and never an error that is the runtime's fault.
func TestReadFileRefusesASymlinkSwappedIn(t *testing.T) {
	t.Parallel()
	r := newSandbox(t)
	ctx := context.Background()
	canary := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(canary, []byte("HOST-CANARY"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws := r.wsDir("sb")
	// Placed where a file was, deterministically: outside and inside links, a link in
	// the middle of the path.
	for name, target := range map[string]string{"abs": canary, "inside": "real", "updir": filepath.Dir(canary)} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "real"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"abs", "inside", "updir/host-secret"} {
		if data, err := r.ReadFile(ctx, "sb", p, 0); !errors.Is(err, sandbox.ErrNotRegular) {
			t.Errorf("read %s: %q, %v; want ErrNotRegular", p, data, err)
		}
		if _, err := r.StatFile(ctx, "sb", p); p == "updir/host-secret" && !errors.Is(err, sandbox.ErrNotRegular) {
			t.Errorf("stat %s: %v; want ErrNotRegular", p, err)
		}
	}

	stop := sandboxtest.SwapLinkAndFile(t, ws, "race", canary)
	var served, refused int
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		data, err := r.ReadFile(ctx, "sb", "race", 0)
		switch {
		case err == nil && string(data) == "inside":
			served++
		case err == nil:
			stop()
			t.Fatalf("read %q through the swapped link", data)
		case errors.Is(err, sandbox.ErrNotRegular):
			refused++
		case errors.Is(err, sandbox.ErrNotFound): // between a rename's unlink and link: no such file
		default:
			stop()
			t.Fatalf("read during the swap: %v; want the file or ErrNotRegular", err)
		}
	}
	stop()
	t.Logf("%d reads served the regular file, %d refused a link", served, refused)
	if served == 0 || refused == 0 {
		t.Fatalf("the race was not exercised: %d served, %d refused", served, refused)
	}
}
