package tools

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/manifest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// readerRuntime answers the package reader with a fixed dump and counts the reads; no
// other method is called.
type readerRuntime struct {
	sandbox.Runtime
	dump  string
	execs atomic.Int32
}

func (r *readerRuntime) Exec(_ context.Context, _ string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	r.execs.Add(1)
	return sandbox.ExecResult{Stdout: []byte(r.dump)}, nil
}

// Offers of the same sandbox with no command in between read its databases once; a
// command, or another generation of the sandbox, reads them again; the installs are
// what the sandbox has beyond the snapshot's manifest.
func TestSessionLineageReadsOncePerCommand(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "cp.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CreateSandboxProvider(ctx, store.SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.ClaimSnapshot(ctx, store.Snapshot{ID: "snap-l", Provider: "local", BuildHash: "h", Spec: "{}"}, "Building", "Failed"); err != nil {
		t.Fatal(err)
	}
	base, _ := manifest.Parse([]byte(`{"v":1,"sources":[],"packages":[{"ecosystem":"pypi","name":"a","version":"1.0"}]}`))
	if err := st.PutSnapshotManifest(ctx, "snap-l", base, 0); err != nil {
		t.Fatal(err)
	}
	rt := &readerRuntime{dump: "@@trueforge-manifest-file /usr/lib/python3/dist-packages/a-1.0.dist-info/METADATA\nName: a\nVersion: 1.0\n" +
		"@@trueforge-manifest-file /workspace/.local/lib/python3.11/site-packages/b-2.0.dist-info/METADATA\nName: B\nVersion: 2.0\n"}
	in := invocation{x: &Executor{Store: st}}
	lease := &lifecycle.Lease{Record: store.SessionSandbox{SandboxID: "sb-lineage-test", SnapshotID: "snap-l", Generation: 1}, Runtime: rt}

	for range 3 {
		digest, installs := in.sessionLineage(ctx, lease, 2)
		if digest != base.Digest() || len(installs) != 1 || installs[0] != (manifest.Package{Ecosystem: manifest.PyPI, Name: "b", Version: "2.0"}) {
			t.Fatalf("lineage = %q %+v", digest, installs)
		}
	}
	if n := rt.execs.Load(); n != 1 {
		t.Fatalf("three offers with no command between read the sandbox %d times, want once", n)
	}
	in.sessionLineage(ctx, lease, 3)
	lease.Record.Generation = 2
	in.sessionLineage(ctx, lease, 3)
	if n := rt.execs.Load(); n != 3 {
		t.Fatalf("a new command and a new generation gave %d reads in all, want 3", n)
	}
	// A snapshot without a manifest: no digest, no diff, no read.
	lease.Record.SnapshotID = "snap-none"
	lease.Record.Generation = 3
	if digest, installs := in.sessionLineage(ctx, lease, 3); digest != "" || installs != nil || rt.execs.Load() != 3 {
		t.Fatalf("without a manifest: %q %+v, %d reads", digest, installs, rt.execs.Load())
	}
}
