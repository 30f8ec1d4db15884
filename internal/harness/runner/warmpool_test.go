package runner_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// On the local backend a warm pool holds real prepared sandboxes: filled, claimed by a
// session's first call (whose first command sees the environment's env, with no create),
// refilled, replaced after an env change (the next session sees the new value), and
// drained to zero, every member deleted from the backend.
func TestWarmPoolLocal(t *testing.T) {
	env := harnesstest.NewEnv(t)
	ctx := context.Background()
	setPool := func(size int64, greeting string) {
		t.Helper()
		e, err := env.Store.GetEnvironment(ctx, "default")
		must(t, err)
		e.CPU, e.MemoryGB, e.DiskGB, e.BlockAll = 0, 0, 0, true
		e.Env = map[string]string{"GREETING": greeting}
		e.Settings.WarmPool = &store.WarmPool{Size: size, MaxAgeSeconds: 3600}
		must(t, env.Store.UpdateEnvironment(ctx, e))
	}
	m := lifecycle.New(lifecycle.Config{Store: env.Store, Runtimes: harnesstest.Source{C: env.Runtime}})
	keep := func(wantCreated, wantDeleted int) []string {
		t.Helper()
		trs, err := m.KeepPools(ctx)
		must(t, err)
		var created []string
		deleted := 0
		for _, tr := range trs {
			switch {
			case tr.Err != nil:
				t.Fatalf("keeper: %v", tr.Err)
			case tr.To == store.SandboxStateDeleted:
				if _, err := env.Runtime.Get(ctx, tr.SandboxID); !errors.Is(err, sandbox.ErrNotFound) {
					t.Fatalf("deleted member %s: Get says %v", tr.SandboxID, err)
				}
				deleted++
			case tr.From == "":
				created = append(created, tr.SandboxID)
			}
		}
		if len(created) != wantCreated || deleted != wantDeleted {
			t.Fatalf("keeper created %v and deleted %d; want %d and %d", created, deleted, wantCreated, wantDeleted)
		}
		return created
	}
	harnesstest.AddAgent(t, env.Store, "p", "default", harnesstest.AgentSpec{"model": harnesstest.Script(), "sandbox": harnesstest.Sandbox("default", 15, 60, 120)})
	first := func(sid, want string) string {
		t.Helper()
		a, err := agents.Load(ctx, env.Store, "p")
		must(t, err)
		must(t, env.Store.CreateSession(ctx, store.Session{ID: sid, Agent: "p", Owner: harnesstest.Owner}))
		creates := env.Runtime.Calls("Create")
		l, err := m.Acquire(ctx, sid, a)
		must(t, err)
		defer l.Release(ctx)
		res, err := l.Runtime.Exec(ctx, l.Record.SandboxID, sandbox.ExecRequest{Shell: `printf %s "$GREETING"`})
		if err != nil || string(res.Stdout) != want {
			t.Fatalf("session %s's first command: %q, %v; want %q", sid, res.Stdout, err, want)
		}
		if !strings.HasPrefix(l.Record.SandboxID, lifecycle.PoolIDPrefix) || env.Runtime.Calls("Create") != creates {
			t.Fatalf("session %s got %s with %d creates; want a pool member and none", sid, l.Record.SandboxID, env.Runtime.Calls("Create")-creates)
		}
		return l.Record.SandboxID
	}

	setPool(2, "hello")
	members := keep(2, 0)
	got := first("s-p1", "hello")
	if got != members[0] && got != members[1] {
		t.Fatalf("claimed %s, not one of %v", got, members)
	}
	keep(1, 0)
	setPool(2, "bye")
	keep(2, 2)
	first("s-p2", "bye")
	must(t, m.Delete(ctx, "s-p1"))
	refill := keep(1, 0)
	if refill[0] == got {
		t.Fatalf("session s-p1's sandbox %s is back in the pool", got)
	}
	setPool(0, "bye")
	keep(0, 2)
	if ms, err := env.Store.ListPoolSandboxes(ctx); err != nil || len(ms) != 0 {
		t.Fatalf("after the drain: %+v, %v", ms, err)
	}
}
