package local

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// The local backend keeps its snapshots as files on a machine (no RemoteSnapshots), and
// its builder and runtime say where: the data directory on this machine, or the shared
// directory when one is set (TRUEFORGE_LOCAL_SHARED_DIR, read by NewBackend).
func TestLocalSnapshotPlace(t *testing.T) {
	requireTools(t)
	if NewBackend().Info().Capabilities.RemoteSnapshots {
		t.Fatal("the local backend claims remote snapshots")
	}
	ctx := context.Background()
	data := t.TempDir()
	m := Machine{ID: "0123456789abcdef", Hostname: "box"}
	bl, err := (&Backend{Machine: m}).Builder(ctx, sandbox.ProviderConfig{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	want := sandbox.Place{Host: "box", Machine: m.ID, Dir: Root(data)}
	if got := bl.(sandbox.Placed).SnapshotPlace(); got != want {
		t.Fatalf("builder place %+v; want %+v", got, want)
	}
	rt, err := (&Backend{Machine: m}).Runtime(ctx, sandbox.ProviderConfig{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	if got := rt.(sandbox.Placed).SnapshotPlace(); got != want {
		t.Fatalf("runtime place %+v; want %+v", got, want)
	}

	shared := t.TempDir()
	t.Setenv(SharedDirEnv, shared)
	be := NewBackend()
	be.Machine = m
	bl, err = be.Builder(ctx, sandbox.ProviderConfig{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	if got := bl.(sandbox.Placed).SnapshotPlace(); got != (sandbox.Place{Host: "box", Dir: shared, Shared: true}) {
		t.Fatalf("shared builder place %+v", got)
	}
	if _, err := os.Stat(shared + "/snapshots"); err != nil {
		t.Fatalf("the shared directory holds no snapshots directory: %v", err)
	}
}

// This machine is named by its machine id when it has one, its hostname for messages.
func TestThisMachine(t *testing.T) {
	m := ThisMachine()
	host, _ := os.Hostname()
	if m.Hostname != host || m.ID == "" {
		t.Fatalf("ThisMachine() = %+v", m)
	}
	if b, err := os.ReadFile("/etc/machine-id"); err == nil && strings.TrimSpace(string(b)) != "" && m.ID != strings.TrimSpace(string(b)) {
		t.Fatalf("machine id %q; want /etc/machine-id's %q", m.ID, strings.TrimSpace(string(b)))
	}
}
