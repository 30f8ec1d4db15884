package runner_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// keepPools runs one pass of m's pool keeper, checks that it created wantCreated members
// and deleted wantDeleted (each gone from rt), and returns the members it created.
func keepPools(t *testing.T, m *lifecycle.Manager, rt sandbox.Runtime, wantCreated, wantDeleted int) []string {
	t.Helper()
	ctx := context.Background()
	trs, err := m.KeepPools(ctx)
	must(t, err)
	var created []string
	deleted := 0
	for _, tr := range trs {
		switch {
		case tr.Err != nil:
			t.Fatalf("keeper: %v", tr.Err)
		case tr.To == store.SandboxStateDeleted:
			if _, err := rt.Get(ctx, tr.SandboxID); !errors.Is(err, sandbox.ErrNotFound) {
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
		return keepPools(t, m, env.Runtime, wantCreated, wantDeleted)
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
		if info, err := env.Runtime.Get(ctx, l.Record.SandboxID); err != nil || info.Labels[lifecycle.LabelSession] != sid || info.Labels[lifecycle.LabelPool] != "" {
			t.Fatalf("claimed member's labels: %v, %v; want session %s's", info.Labels, err, sid)
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

// A proxied environment's pool (the local backend without block_all) holds sandboxes
// whose egress proxy is prepared and not served: no session's secrets are lent to a
// member. A session run by another harness process than the keeper's claims one, serves
// its proxy with its own consent and log, and its first request reaches the allowed host
// with the secret substituted; a rotation reaches it at the next request; a secret added
// later changes what a member is made with (its placeholders), so the members are
// replaced, and the claimed sandbox never sees the new secret.
func TestWarmPoolProxied(t *testing.T) {
	f := newEgressFixture(t)
	ctx := context.Background()
	editEnvironment(t, f.env.Store, "default", func(e *store.Environment) {
		e.Settings.WarmPool = &store.WarmPool{Size: 1, MaxAgeSeconds: 3600}
	})
	keeper, keeperProxies := f.manager, f.proxies
	keep := func(wantCreated, wantDeleted int) []string {
		t.Helper()
		return keepPools(t, keeper, f.env.Runtime, wantCreated, wantDeleted)
	}
	member := keep(1, 0)[0]
	if live := keeperProxies.Live(); len(live) != 0 {
		t.Fatalf("proxies served for unclaimed members: %v", live)
	}
	if _, err := f.env.Store.GetSandboxEgress(ctx, member); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unclaimed member has a session's egress record: %v", err)
	}

	// The session runs in another harness process.
	f.newHarness(t, netdHelper(t))
	harnesstest.AddAgent(t, f.env.Store, "poolnet", "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			exec(curlAuth(f.up.port)+`; echo "late=${LATE_TOKEN:-unset}"`), text("first"),
			exec(curlAuth(f.up.port)), text("rotated"),
		),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
	r := f.runner(t, "poolnet")
	sid := ownerSession(t, r)
	creates := f.env.Runtime.Calls("Create")
	mustRun(t, r, sid, "go")
	rec, err := f.env.Store.GetSessionSandbox(ctx, sid)
	must(t, err)
	if rec.SandboxID != member || f.env.Runtime.Calls("Create") != creates {
		t.Fatalf("session %s got %s with %d creates; want the pool member %s and none", sid, rec.SandboxID, f.env.Runtime.Calls("Create")-creates, member)
	}
	if got := lastResult(t, f.env.Store, sid); !strings.Contains(got, "authorized by upstream") || !strings.Contains(got, "late=unset") {
		t.Fatalf("the claimed member's first request: %q", got)
	}
	if h := f.up.headers(); len(h) != 1 || h[0] != "Bearer "+secretV1 {
		t.Fatalf("upstream saw Authorization %q; want the secret substituted once", h)
	}
	countAllowed := func(ds []map[string]any) int {
		n := 0
		for _, d := range ds {
			if s, _ := d["secrets"].([]any); d["allowed"] == true && len(s) == 1 && s[0] == "API_TOKEN" {
				n++
			}
		}
		return n
	}
	allowed := countAllowed(waitPayloads(t, f.env.Store, sid, events.KindEgress, func(ds []map[string]any) bool { return countAllowed(ds) > 0 }))
	if allowed != 1 {
		t.Fatalf("%d allowed egress decisions with API_TOKEN in the session's log; want 1", allowed)
	}
	if eg, err := f.env.Store.GetSandboxEgress(ctx, member); err != nil || eg.SessionID != sid {
		t.Fatalf("the claimed member's egress record: %+v, %v; want session %s's", eg, err, sid)
	}

	// Rotation reaches the claimed member at its next request.
	f.putSecret(t, "API_TOKEN", secretV2, false)
	f.up.expect(secretV2)
	mustRun(t, r, sid, "rotated")
	if got := lastResult(t, f.env.Store, sid); !strings.Contains(got, "authorized by upstream") {
		t.Fatalf("after the rotation: %q", got)
	}

	// The pool is refilled; a secret added changes the members' placeholders: replaced.
	refill := keep(1, 0)
	f.putSecret(t, "LATE_TOKEN", secretLate, true)
	replaced := keep(1, 1)
	if replaced[0] == refill[0] || replaced[0] == member {
		t.Fatalf("after a secret was added the pool holds %v (before %v)", replaced, refill)
	}
	editEnvironment(t, f.env.Store, "default", func(e *store.Environment) { e.Settings.WarmPool = nil })
	keep(0, 1)
	for _, h := range f.up.headers() {
		if strings.Contains(h, secretLate) {
			t.Fatal("the secret added after the member was made reached the upstream")
		}
	}
}

// On the Daytona emulator a pool member is made with the pool's labels and relabelled
// with the session's when a session claims it: what lists the backend's sandboxes (the
// orphan sweep, Daytona's console) sees whose it is, and the runtime's own labels stay.
func TestWarmPoolDaytonaRelabels(t *testing.T) {
	fx := daytonaPool(t)
	ctx := context.Background()
	e, err := fx.st.GetEnvironment(ctx, fx.env)
	must(t, err)
	e.Settings.WarmPool = &store.WarmPool{Size: 1, MaxAgeSeconds: 3600}
	must(t, fx.st.UpdateEnvironment(ctx, e))
	trs, err := fx.m.KeepPools(ctx)
	must(t, err)
	if len(trs) != 1 || trs[0].Err != nil {
		t.Fatalf("keeper: %+v", trs)
	}
	member := trs[0].SandboxID
	harnesstest.AddAgent(t, fx.st, "p", fx.env, harnesstest.AgentSpec{"model": harnesstest.Script(), "sandbox": harnesstest.Sandbox(fx.env, 15, 60, 120)})
	a, err := agents.Load(ctx, fx.st, "p")
	must(t, err)
	must(t, fx.st.CreateSession(ctx, store.Session{ID: "s-dtpool", Agent: "p", Owner: harnesstest.Owner}))
	l, err := fx.m.Acquire(ctx, "s-dtpool", a)
	must(t, err)
	defer l.Release(ctx)
	if l.Record.SandboxID != member {
		t.Fatalf("session got %s; want the pool member %s", l.Record.SandboxID, member)
	}
	info, err := l.Runtime.Get(ctx, member)
	must(t, err)
	if info.Labels[lifecycle.LabelSession] != "s-dtpool" || info.Labels[lifecycle.LabelAgent] != "p" || info.Labels[lifecycle.LabelPool] != "" {
		t.Fatalf("claimed member's labels on Daytona: %v; want the session's", info.Labels)
	}
	list, err := l.Runtime.List(ctx)
	must(t, err)
	found := false
	for _, s := range list {
		found = found || s.ID == member && s.Labels[lifecycle.LabelSession] == "s-dtpool"
	}
	if !found {
		t.Fatalf("List does not show %s under its id with the session's labels: %+v", member, list)
	}
	must(t, fx.m.Delete(ctx, "s-dtpool"))
}
