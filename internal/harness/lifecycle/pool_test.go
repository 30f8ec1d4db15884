package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// pooled makes the machine's environment a stored one (snapshot Ready) with a warm pool
// of size, and points the agent at it.
func (x *machine) pooled(t *testing.T, size int64) {
	t.Helper()
	ctx := t.Context()
	x.readySnapshot(t, snapshot)
	env := store.Environment{ID: "env-1", Name: "env", Provider: "fake", Owner: "team-a", Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 1,
		BuildHash: "h1", SnapshotID: snapshot, BlockAll: true, Env: map[string]string{"A": "1"},
		Settings: store.EnvironmentSettings{WarmPool: &store.WarmPool{Size: size, MaxAgeSeconds: 600}}}
	must(t, x.st.CreateEnvironment(ctx, env))
	x.reloadEnv(t)
}

func (x *machine) readySnapshot(t *testing.T, id string) {
	t.Helper()
	ctx := t.Context()
	if _, _, err := x.st.ClaimSnapshot(ctx, store.Snapshot{ID: id, Provider: "fake", BuildHash: id, Spec: "{}"}, sandbox.StatusBuilding, sandbox.StatusFailed); err != nil {
		t.Fatal(err)
	}
	must(t, x.st.SetSnapshotState(ctx, id, sandbox.StatusReady, "", ""))
}

// reloadEnv points the agent at the environment as stored (what agents.Load would read).
func (x *machine) reloadEnv(t *testing.T) {
	t.Helper()
	env, err := x.st.GetEnvironment(t.Context(), "env")
	must(t, err)
	x.agent.Environment = env
}

// change applies fn to the stored environment, as an apply of a live setting would.
func (x *machine) change(t *testing.T, fn func(e *store.Environment)) {
	t.Helper()
	env, err := x.st.GetEnvironment(t.Context(), "env")
	must(t, err)
	fn(&env)
	must(t, x.st.UpdateEnvironment(t.Context(), env))
	x.reloadEnv(t)
}

// keep runs one keeper pass and returns the members it created and deleted.
func (x *machine) keep(t *testing.T) (created, deleted []string) {
	t.Helper()
	trs, err := x.m.KeepPools(t.Context())
	must(t, err)
	for _, tr := range trs {
		switch {
		case tr.Err != nil:
			t.Fatalf("keeper: %v", tr.Err)
		case tr.To == fromPool:
			created = append(created, tr.SandboxID)
		case tr.From == fromPool && tr.To == store.SandboxStateDeleted:
			deleted = append(deleted, tr.SandboxID)
		}
	}
	return created, deleted
}

func (x *machine) members(t *testing.T) []store.PoolSandbox {
	t.Helper()
	ps, err := x.st.ListPoolSandboxes(t.Context())
	must(t, err)
	return ps
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The keeper fills the pool; the first call of a session claims a member (no create),
// and the next pass refills the pool. A member is made from the environment's snapshot
// and env, labelled with its pool, and the session's event says where it came from.
func TestPoolFilledClaimedRefilled(t *testing.T) {
	x := newMachine(t)
	x.pooled(t, 2)
	created, _ := x.keep(t)
	if len(created) != 2 || len(x.members(t)) != 2 {
		t.Fatalf("first pass created %v, %d members; want 2", created, len(x.members(t)))
	}
	if again, _ := x.keep(t); len(again) != 0 {
		t.Fatalf("a full pool's pass created %v", again)
	}
	info, err := x.rt.Get(t.Context(), created[0])
	must(t, err)
	if info.SnapshotID != snapshot || info.Labels[LabelPool] != "env" || info.Labels[LabelSession] != "" {
		t.Fatalf("member: %+v", info)
	}
	creates := x.rt.counts["Create"]
	l, err := x.acquire(t)
	must(t, err)
	if !slices.Contains(created, l.Record.SandboxID) || x.rt.counts["Create"] != creates || !l.Provisioned {
		t.Fatalf("claimed %s (members %v), creates %d → %d", l.Record.SandboxID, created, creates, x.rt.counts["Create"])
	}
	if rec := x.record(t); rec.SandboxID != l.Record.SandboxID || rec.State != store.SandboxStateRunning {
		t.Fatalf("record: %+v", rec)
	}
	// Relabelled for the session: what lists the backend's sandboxes sees whose it is.
	info, err = x.rt.Get(t.Context(), l.Record.SandboxID)
	must(t, err)
	if info.Labels[LabelSession] != sessionID || info.Labels[LabelOwner] != "alice" || info.Labels[LabelPool] != "" {
		t.Fatalf("claimed member's labels: %v; want the session's, not the pool's", info.Labels)
	}
	var reason string
	for _, p := range x.events {
		if e, ok := p.(events.SandboxProvisioned); ok {
			reason = e.Reason
		}
	}
	if !strings.Contains(reason, "warm pool") {
		t.Fatalf("provisioned reason %q does not say the warm pool", reason)
	}
	if ms := x.members(t); len(ms) != 1 || ms[0].SandboxID == l.Record.SandboxID {
		t.Fatalf("after the claim: %+v", ms)
	}
	refill, _ := x.keep(t)
	if len(refill) != 1 || len(x.members(t)) != 2 {
		t.Fatalf("refill created %v; want 1", refill)
	}
	// The session's sandbox is its own from now on: the next call attaches to it.
	l2, err := x.acquire(t)
	must(t, err)
	if l2.Record.SandboxID != l.Record.SandboxID || l2.Provisioned {
		t.Fatalf("second call: %+v", l2.Record)
	}
}

// A member that cannot be relabelled for the session is not handed out: it is deleted
// and the session gets the next member, or a sandbox of its own.
func TestPoolClaimRelabelFails(t *testing.T) {
	x := newMachine(t)
	x.pooled(t, 2)
	created, _ := x.keep(t)
	x.rt.failAfter("Relabel", 1, errors.New("labels: 503"))
	l, err := x.acquire(t)
	must(t, err)
	// The first relabel succeeds: the first member is claimed.
	if !slices.Contains(created, l.Record.SandboxID) {
		t.Fatalf("claimed %s; want one of %v", l.Record.SandboxID, created)
	}
	must(t, x.st.CreateSession(t.Context(), store.Session{ID: "s-m2", Agent: "helper", Owner: "bob"}))
	l2, err := x.m.Acquire(t.Context(), "s-m2", x.agent)
	must(t, err)
	l2.Release(t.Context())
	if slices.Contains(created, l2.Record.SandboxID) || len(x.members(t)) != 0 {
		t.Fatalf("session s-m2 got %s after its relabel failed (members %v, %d left)", l2.Record.SandboxID, created, len(x.members(t)))
	}
	for _, id := range created {
		if id != l.Record.SandboxID && x.rt.status(id) != "gone" {
			t.Fatalf("the member whose relabel failed is %s; want it deleted", x.rt.status(id))
		}
	}
}

// Without a pool, or with an empty one, the first call creates as before.
func TestPoolEmptyFallsBackToCreate(t *testing.T) {
	x := newMachine(t)
	x.pooled(t, 1)
	l, err := x.acquire(t)
	must(t, err)
	if l.Record.SandboxID != sandboxID(sessionID, 1) || x.rt.counts["Create"] != 1 {
		t.Fatalf("empty pool: %s, %d creates", l.Record.SandboxID, x.rt.counts["Create"])
	}
}

// A session never gets a sandbox another session used: each claim takes a member out of
// the pool for good, and a session's sandbox never enters one.
func TestPoolNeverSharesUsedSandboxes(t *testing.T) {
	x := newMachine(t)
	x.pooled(t, 1)
	x.keep(t)
	l, err := x.acquire(t)
	must(t, err)
	must(t, x.m.Delete(t.Context(), sessionID))
	x.keep(t)
	for _, p := range x.members(t) {
		if p.SandboxID == l.Record.SandboxID {
			t.Fatalf("the used sandbox %s is back in the pool", p.SandboxID)
		}
	}
	must(t, x.st.CreateSession(t.Context(), store.Session{ID: "s-m2", Agent: "helper", Owner: "bob"}))
	l2, err := x.m.Acquire(t.Context(), "s-m2", x.agent)
	must(t, err)
	l2.Release(t.Context())
	if l2.Record.SandboxID == l.Record.SandboxID {
		t.Fatalf("session s-m2 got session %s's sandbox %s", sessionID, l.Record.SandboxID)
	}
}

// Two replicas (two Managers on one store) claiming from one pool at once never hand
// one sandbox to two sessions; sessions beyond the pool's size get sandboxes of their own.
func TestPoolReplicasNeverShare(t *testing.T) {
	x := newMachine(t)
	const size, sessions = 4, 12
	x.pooled(t, size)
	x.keep(t)
	other := New(Config{Store: x.st, Runtimes: fakeSource{x.rt}, Now: func() time.Time { return x.now }, Owner: "other-harness", ChangeWait: time.Second,
		Record: func(context.Context, string, events.Payload) {}})
	ids := make([]string, sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		sid := fmt.Sprintf("s-r%d", i)
		must(t, x.st.CreateSession(t.Context(), store.Session{ID: sid, Agent: "helper", Owner: "alice"}))
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := x.m
			if i%2 == 1 {
				m = other
			}
			l, err := m.Acquire(context.Background(), sid, x.agent)
			if err != nil {
				t.Errorf("session %s: %v", sid, err)
				return
			}
			l.Release(context.Background())
			ids[i] = l.Record.SandboxID
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	fromPoolN := 0
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("sandbox %s handed to two sessions: %v", id, ids)
		}
		seen[id] = true
		if strings.HasPrefix(id, PoolIDPrefix) {
			fromPoolN++
		}
	}
	if fromPoolN != size || len(x.members(t)) != 0 {
		t.Fatalf("%d sessions got pool members, %d left; want all %d claimed once", fromPoolN, len(x.members(t)), size)
	}
}

// A member no longer made as a session's own sandbox would be is replaced by the next
// pass, and never claimed meanwhile: after a snapshot change and after an env change.
func TestPoolReplacedAfterChange(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, x *machine, e *store.Environment)
	}{
		{"snapshot", func(t *testing.T, x *machine, e *store.Environment) {
			x.readySnapshot(t, "snap-2")
			e.SnapshotID, e.BuildHash = "snap-2", "h2"
		}},
		{"env", func(_ *testing.T, _ *machine, e *store.Environment) { e.Env = map[string]string{"A": "2"} }},
		{"labels", func(_ *testing.T, _ *machine, e *store.Environment) {
			e.Settings.Labels = map[string]string{"team": "x"}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := newMachine(t)
			x.pooled(t, 2)
			old, _ := x.keep(t)
			x.change(t, func(e *store.Environment) { c.change(t, x, e) })
			// Before the keeper's pass: the old members are not claimed.
			l, err := x.acquire(t)
			must(t, err)
			if slices.Contains(old, l.Record.SandboxID) {
				t.Fatalf("claimed %s, made before the %s change", l.Record.SandboxID, c.name)
			}
			created, deleted := x.keep(t)
			slices.Sort(old)
			slices.Sort(deleted)
			if !slices.Equal(old, deleted) || len(created) != 2 {
				t.Fatalf("after the %s change: deleted %v (want %v), created %v", c.name, deleted, old, created)
			}
			for _, id := range old {
				if x.rt.status(id) != "gone" {
					t.Fatalf("replaced member %s is %s", id, x.rt.status(id))
				}
			}
			info, err := x.rt.Get(t.Context(), created[0])
			must(t, err)
			if info.SnapshotID != x.agent.Environment.SnapshotID {
				t.Fatalf("new member from %s; want %s", info.SnapshotID, x.agent.Environment.SnapshotID)
			}
			must(t, x.st.CreateSession(t.Context(), store.Session{ID: "s-m2", Agent: "helper", Owner: "alice"}))
			l2, err := x.m.Acquire(t.Context(), "s-m2", x.agent)
			must(t, err)
			l2.Release(t.Context())
			if !slices.Contains(created, l2.Record.SandboxID) {
				t.Fatalf("after the pass, session s-m2 got %s; want one of %v", l2.Record.SandboxID, created)
			}
		})
	}
}

// size 0 drains the pool; members unclaimed past max_age are deleted and replaced, and
// every deletion is reported as a transition to deleted, as the reaper's are.
func TestPoolDrainsAndAges(t *testing.T) {
	x := newMachine(t)
	x.pooled(t, 3)
	first, _ := x.keep(t)
	x.now = x.now.Add(11 * time.Minute) // max_age is 10 min
	created, deleted := x.keep(t)
	if len(deleted) != 3 || len(created) != 3 {
		t.Fatalf("past max_age: deleted %v, created %v; want all 3 of %v replaced", deleted, created, first)
	}
	x.change(t, func(e *store.Environment) { e.Settings.WarmPool.Size = 1 })
	if created, deleted = x.keep(t); len(deleted) != 2 || len(created) != 0 || len(x.members(t)) != 1 {
		t.Fatalf("size 3 → 1: deleted %v, created %v", deleted, created)
	}
	x.change(t, func(e *store.Environment) { e.Settings.WarmPool = nil })
	if _, deleted = x.keep(t); len(deleted) != 1 || len(x.members(t)) != 0 {
		t.Fatalf("size → 0: deleted %v, %d left", deleted, len(x.members(t)))
	}
	for _, id := range append(first, created...) {
		if x.rt.status(id) != "gone" {
			t.Fatalf("member %s is %s after the drain", id, x.rt.status(id))
		}
	}
}

// An environment whose snapshot is not Ready keeps no pool; the members of an environment
// that is gone are deleted.
func TestPoolNotReadyAndGone(t *testing.T) {
	x := newMachine(t)
	x.pooled(t, 2)
	x.keep(t)
	must(t, x.st.SetSnapshotState(t.Context(), snapshot, sandbox.StatusBuilding, "", ""))
	if created, deleted := x.keep(t); len(created) != 0 || len(deleted) != 2 {
		t.Fatalf("not Ready: created %v, deleted %v", created, deleted)
	}
	must(t, x.st.SetSnapshotState(t.Context(), snapshot, sandbox.StatusReady, "", ""))
	x.keep(t)
	must(t, x.st.DeleteEnvironment(t.Context(), "env"))
	if _, deleted := x.keep(t); len(deleted) != 2 || len(x.members(t)) != 0 {
		t.Fatalf("environment gone: deleted %v", deleted)
	}
}

// A member whose create fails leaves no row and no box, and the pass reports it.
func TestPoolCreateFails(t *testing.T) {
	x := newMachine(t)
	x.pooled(t, 1)
	x.rt.failAfter("Create", 0, errors.New("quota exceeded"))
	trs, err := x.m.KeepPools(t.Context())
	must(t, err)
	if len(trs) != 1 || trs[0].Err == nil || !strings.Contains(trs[0].Err.Error(), "quota exceeded") {
		t.Fatalf("transitions: %+v", trs)
	}
	if len(x.members(t)) != 0 || x.rt.counts["Delete"] != 1 {
		t.Fatalf("after a failed create: %d members, %d deletes", len(x.members(t)), x.rt.counts["Delete"])
	}
}

// A box labelled as a pool member that nothing points at (its keeper or its claimer
// died between taking its row and deleting or relabelling it) is deleted by the keeper
// once seen so on two sweeps PoolOrphanAge apart, and reported as a member's deletion;
// members, and sandboxes claimed by sessions, are left alone.
func TestPoolOrphansSwept(t *testing.T) {
	x := newMachine(t)
	x.pooled(t, 2)
	created, _ := x.keep(t)
	l, err := x.acquire(t) // a claimed member: the session's now
	must(t, err)
	orphan := created[0]
	if orphan == l.Record.SandboxID {
		orphan = created[1]
	}
	took, err := x.st.TakePoolSandbox(t.Context(), orphan, store.PoolReady) // and its taker died
	must(t, err)
	if !took {
		t.Fatal("the member's row was gone already")
	}
	x.now = x.now.Add(PoolOrphanAge / 2)
	if _, deleted := x.keep(t); len(deleted) != 0 {
		t.Fatalf("first sighting deleted %v", deleted)
	}
	x.now = x.now.Add(PoolOrphanAge)
	_, deleted := x.keep(t)
	if !slices.Equal(deleted, []string{orphan}) || x.rt.status(orphan) != "gone" {
		t.Fatalf("second sighting deleted %v (orphan %s is %s); want the orphan alone", deleted, orphan, x.rt.status(orphan))
	}
	if x.rt.status(l.Record.SandboxID) != sandbox.SandboxRunning || len(x.members(t)) != 2 {
		t.Fatalf("the session's sandbox is %s, %d members; want it running and the pool full", x.rt.status(l.Record.SandboxID), len(x.members(t)))
	}
}
