package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Two `serve` replicas (the real binary, as the harness role on one PostgreSQL
// database) keep one warm pool between them, on their own loop: filled to its size and
// never past it, a member claimed by a `run` process's first sandbox call (no create)
// and the pool refilled, and, when size goes to 0, drained, each deletion printed once.
func TestServeReplicasKeepOnePool(t *testing.T) {
	st, url := pgControlPlane(t)
	ctx := context.Background()
	setSize := func(size int64) {
		t.Helper()
		e, err := st.GetEnvironment(ctx, "isolated")
		if err != nil {
			t.Fatal(err)
		}
		e.Settings.WarmPool = &store.WarmPool{Size: size, MaxAgeSeconds: 3600}
		if size == 0 {
			e.Settings.WarmPool = nil
		}
		if err := st.UpdateEnvironment(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	ready := func() (n, rows int) {
		ms, err := st.ListPoolSandboxes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.State == store.PoolReady {
				n++
			}
		}
		return n, len(ms)
	}
	harnesstest.AddAgent(t, st, "pooled", "isolated", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			map[string]any{"tool_calls": []any{map[string]any{"name": "exec", "arguments": map[string]any{"command": "echo from-the-pool"}}}},
			map[string]any{"text": "done"}),
		"sandbox": harnesstest.Sandbox("isolated", 15, 60, 120),
	})
	setSize(2)
	replicas := make([]*exec.Cmd, 2)
	outs := make([]*sandboxtest.SyncBuffer, 2)
	for i := range replicas {
		replicas[i], outs[i], _ = harnessProcess(t, "--database-url", url, "serve", "--interval", "1s", "--pool-interval", "100ms")
	}
	printed := func(what string) int {
		n := 0
		for _, o := range outs {
			n += strings.Count(o.String(), what)
		}
		return n
	}
	sandboxtest.WaitFor(t, "the replicas to fill the pool", 60*time.Second, func() bool {
		n, _ := ready()
		return n == 2
	})
	for range 5 { // several passes of both: the pool stays at its size
		time.Sleep(150 * time.Millisecond)
		if _, rows := ready(); rows != 2 {
			t.Fatalf("%d pool rows; want 2 (replica output:\n%s\n---\n%s)", rows, outs[0], outs[1])
		}
	}
	if n := printed("warm pool: sandbox"); n != 2 {
		t.Fatalf("the replicas printed %d pool transitions; want 2 creations:\n%s\n---\n%s", n, outs[0], outs[1])
	}

	turn, out, turnErr := harnessProcess(t, "--database-url", url, "run", "pooled", "go")
	if err := turn.Wait(); err != nil || !strings.Contains(out.String(), "done") {
		t.Fatalf("the turn: %v\n%s\n%s", err, out, turnErr)
	}
	ss, err := st.ListSessions(ctx, "", "pooled")
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions: %v %v", ss, err)
	}
	rec, err := st.GetSessionSandbox(ctx, ss[0].ID)
	if err != nil || !strings.HasPrefix(rec.SandboxID, lifecycle.PoolIDPrefix) {
		t.Fatalf("the session's sandbox: %+v, %v; want a pool member", rec, err)
	}
	sandboxtest.WaitFor(t, "the replicas to refill the pool", 60*time.Second, func() bool {
		n, _ := ready()
		return n == 2
	})

	setSize(0)
	sandboxtest.WaitFor(t, "the replicas to drain the pool", 60*time.Second, func() bool {
		_, rows := ready()
		return rows == 0 && printed("pooled -> deleted") == 2
	})
	time.Sleep(300 * time.Millisecond)
	if n := printed("pooled -> deleted"); n != 2 {
		t.Fatalf("the replicas printed %d deletions; want 2:\n%s\n---\n%s", n, outs[0], outs[1])
	}
	for i, r := range replicas {
		_ = r.Process.Signal(os.Interrupt)
		if err := r.Wait(); err != nil {
			t.Fatalf("replica %d did not stop cleanly on an interrupt: %v", i+1, err)
		}
	}
}
