package lifecycle

import (
	"fmt"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// provisioned returns the sandbox_provisioned events recorded since the last call, and
// forgets every event.
func (x *machine) provisioned() []events.SandboxProvisioned {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []events.SandboxProvisioned
	for _, p := range x.events {
		if e, ok := p.(events.SandboxProvisioned); ok {
			out = append(out, e)
		}
	}
	x.events = nil
	return out
}

// Under a rollout, a session's sandbox comes from the current snapshot or the previous
// kept one as agents.InRolloutShare says of its id, a re-provisioned sandbox of the
// session from the same one, and each sandbox_provisioned event says which; a session
// on the previous version never claims a warm pool member (made from the current one).
func TestProvisionFollowsRollout(t *testing.T) {
	x := newMachine(t)
	x.pooled(t, 0) // env at snapshot (snap-1)
	x.readySnapshot(t, "snap-2")
	x.change(t, func(e *store.Environment) {
		e.SnapshotID, e.BuildHash = "snap-2", "snap-2"
		e.Settings.Rollout = &store.Rollout{Percent: 50}
	})
	_ = x.provisioned()
	ctx := t.Context()
	onCurrent := 0
	for i := range 40 {
		id := fmt.Sprintf("s-r%d", i)
		must(t, x.st.CreateSession(ctx, store.Session{ID: id, Agent: "helper", Owner: "alice"}))
		want, wantSnap := agents.VersionPrevious, snapshot
		if agents.InRolloutShare(id, 50) {
			want, wantSnap = agents.VersionCurrent, "snap-2"
			onCurrent++
		}
		for gen := int64(1); gen <= 2; gen++ {
			l, err := x.m.Acquire(ctx, id, x.agent)
			must(t, err)
			l.Release(ctx)
			if l.Record.SnapshotID != wantSnap || l.Record.Generation != gen {
				t.Fatalf("session %s generation %d: sandbox from %s (generation %d); want %s", id, gen, l.Record.SnapshotID, l.Record.Generation, wantSnap)
			}
			if box := x.rt.boxes[l.Record.SandboxID]; box == nil || box.SnapshotID != wantSnap {
				t.Fatalf("session %s: the backend's box is %+v; want one from %s", id, box, wantSnap)
			}
			evs := x.provisioned()
			if len(evs) != 1 || evs[0].Version != want || evs[0].RolloutPercent != 50 || evs[0].SnapshotID != wantSnap {
				t.Fatalf("session %s generation %d: sandbox_provisioned %+v; want version %s, rollout_percent 50, snapshot %s", id, gen, evs, want, wantSnap)
			}
			must(t, x.m.Delete(ctx, id)) // the next acquire re-provisions: the same choice
		}
	}
	if onCurrent == 0 || onCurrent == 40 {
		t.Fatalf("%d of 40 sessions on the current version at 50%%; want both versions used", onCurrent)
	}

	// With a warm pool: a session on the current version claims a member, one on the
	// previous version creates its own sandbox from the previous snapshot.
	x.change(t, func(e *store.Environment) { e.Settings.WarmPool = &store.WarmPool{Size: 1, MaxAgeSeconds: 600} })
	var prev, cur string
	for i := 0; prev == "" || cur == ""; i++ {
		id := fmt.Sprintf("s-p%d", i)
		if agents.InRolloutShare(id, 50) && cur == "" {
			cur = id
		} else if !agents.InRolloutShare(id, 50) && prev == "" {
			prev = id
		}
	}
	for _, id := range []string{prev, cur} {
		created, _ := x.keep(t)
		if len(x.members(t)) != 1 {
			t.Fatalf("pool members %+v (created %v); want 1", x.members(t), created)
		}
		must(t, x.st.CreateSession(ctx, store.Session{ID: id, Agent: "helper", Owner: "alice"}))
		l, err := x.m.Acquire(ctx, id, x.agent)
		must(t, err)
		l.Release(ctx)
		pooled := strings.HasPrefix(l.Record.SandboxID, PoolIDPrefix)
		if id == prev && (pooled || l.Record.SnapshotID != snapshot) {
			t.Fatalf("a session on the previous version got %s from %s", l.Record.SandboxID, l.Record.SnapshotID)
		}
		if id == cur && (!pooled || l.Record.SnapshotID != "snap-2") {
			t.Fatalf("a session on the current version got %s from %s; want the pool's member", l.Record.SandboxID, l.Record.SnapshotID)
		}
	}

	// Rollout unset: every session on the current version, and the event names none.
	x.change(t, func(e *store.Environment) { e.Settings.Rollout, e.Settings.WarmPool = nil, nil })
	_ = x.provisioned()
	for i := range 10 {
		id := fmt.Sprintf("s-n%d", i)
		must(t, x.st.CreateSession(ctx, store.Session{ID: id, Agent: "helper", Owner: "alice"}))
		l, err := x.m.Acquire(ctx, id, x.agent)
		must(t, err)
		l.Release(ctx)
		evs := x.provisioned()
		if l.Record.SnapshotID != "snap-2" || len(evs) != 1 || evs[0].Version != "" || evs[0].RolloutPercent != 0 {
			t.Fatalf("without a rollout: sandbox from %s, events %+v", l.Record.SnapshotID, evs)
		}
	}
}
