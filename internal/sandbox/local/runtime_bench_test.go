//go:build linux

package local

import (
	"context"
	"os/exec"
	"strconv"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// The three benchmarks run side by side: cold start (create from a Ready snapshot and the
// first exec of true), warm exec (true in an existing sandbox) and, as the yardstick, a
// bare fork/exec of true.

func BenchmarkColdStart(b *testing.B) {
	r, rel := newTestRuntime(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := "cold-" + strconv.Itoa(i)
		if err := r.Create(ctx, sandbox.CreateRequest{ID: id, SnapshotID: rel}); err != nil {
			b.Fatal(err)
		}
		res, err := r.Exec(ctx, id, sandbox.ExecRequest{Argv: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v %d %s", err, res.ExitCode, res.Stderr)
		}
		b.StopTimer()
		if err := r.Delete(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func BenchmarkWarmExec(b *testing.B) {
	r, rel := newTestRuntime(b)
	ctx := context.Background()
	create(b, r, sandbox.CreateRequest{ID: "warm", SnapshotID: rel})
	mustSh(b, r, "warm", "true")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := r.Exec(ctx, "warm", sandbox.ExecRequest{Argv: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v %d %s", err, res.ExitCode, res.Stderr)
		}
	}
}

func BenchmarkBareForkExec(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
