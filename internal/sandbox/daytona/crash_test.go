package daytona_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// TestExecRestartsAKilledSandbox: a sandbox whose container was killed underneath (a
// crash, the OOM killer) reads stopped on Daytona, with desiredState stopped, its
// sessions gone and its files kept. The next Exec of the runtime that started it starts
// it again and runs the command, files intact and stdin whole. A sandbox the runtime stopped itself, or
// one another runtime started, still gives ErrStopped, and one that cannot be started
// again is ErrLost.
func TestExecRestartsAKilledSandbox(t *testing.T) {
	t.Parallel()
	srv, c, rt, snap := newRuntime(t)
	ctx := testCtx(t)
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "crash", SnapshotID: snap}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), "crash") })
	cat := sandbox.ExecRequest{Shell: "cat /workspace/kept"}
	mustExec(t, rt, "crash", sandbox.ExecRequest{Shell: "echo kept > /workspace/kept"})

	if !srv.KillContainer("crash") {
		t.Fatal("KillContainer: no started sandbox crash")
	}
	sb, err := c.GetSandbox(ctx, "crash")
	if err != nil || sb.State != daytona.SandboxStopped || sb.DesiredState != daytona.SandboxStopped {
		t.Fatalf("after the kill Daytona reports %+v %v; want stopped, desiredState stopped", sb, err)
	}
	if ids := srv.Sessions("crash"); len(ids) != 0 {
		t.Fatalf("sessions %v outlived the container", ids)
	}
	// Its stdin, read before the restart, reaches the command after it.
	res := mustExec(t, rt, "crash", sandbox.ExecRequest{Shell: "cat /workspace/kept -", Stdin: strings.NewReader("and stdin\n")})
	if string(res.Stdout) != "kept\nand stdin\n" {
		t.Fatalf("exec after the kill: %q; want the file kept and the stdin", res.Stdout)
	}
	if st := srv.SandboxState("crash"); st != daytona.SandboxStarted {
		t.Fatalf("after the exec the sandbox is %q, want started again", st)
	}

	// Stopped by the runtime: not started behind the caller's back.
	if err := rt.Stop(ctx, "crash"); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Exec(ctx, "crash", cat); !errors.Is(err, sandbox.ErrStopped) {
		t.Fatalf("exec after Stop: %v, want ErrStopped", err)
	}
	if err := rt.Start(ctx, "crash"); err != nil {
		t.Fatal(err)
	}

	// Another runtime, which did not start it, knows no better than Daytona.
	other := &daytona.Runtime{C: c, Labels: rt.Labels}
	srv.KillContainer("crash")
	if _, err := other.Exec(ctx, "crash", cat); !errors.Is(err, sandbox.ErrStopped) {
		t.Fatalf("exec by another runtime after the kill: %v, want ErrStopped", err)
	}

	// Started again but refused: lost.
	srv.InjectFaultsMessage("POST /sandbox/{id}/start", 1, 400, "Sandbox is not in valid state")
	if _, err := rt.Exec(ctx, "crash", cat); !errors.Is(err, sandbox.ErrLost) || errors.Is(err, sandbox.ErrStopped) {
		t.Fatalf("exec when the start fails: %v, want ErrLost only", err)
	}
}
