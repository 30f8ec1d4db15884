package lifecycle

import (
	"slices"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// next picks one transition for every record state and backend answer, and each is
// one the table lets start from that state.
func TestNextCoversEveryStateAndAnswer(t *testing.T) {
	boxes := map[box]string{boxGone: "gone", boxRunning: "running", boxDown: "down"}
	want := map[string]map[box]transition{
		noRecord:                   {boxUnasked: tProvision},
		store.SandboxStateDeleted:  {boxUnasked: tRecreate},
		store.SandboxStateChanging: {boxUnasked: tWait},
		store.SandboxStateRunning:  {boxGone: tRecreate, boxRunning: tAttach, boxDown: tResume},
		store.SandboxStateStopped:  {boxGone: tRecreate, boxRunning: tSettle, boxDown: tResume},
		store.SandboxStateArchived: {boxGone: tRecreate, boxRunning: tSettle, boxDown: tResume},
		store.SandboxStateLost:     {boxGone: tRecreate, boxRunning: tRecover, boxDown: tRecover},
	}
	for state, byBox := range want {
		if needsBox(state) == (len(byBox) == 1) {
			t.Errorf("needsBox(%q) = %v", state, needsBox(state))
		}
		for b, tr := range byBox {
			got, err := next(state, b)
			if err != nil || got != tr {
				t.Errorf("next(%q, %s) = %q, %v; want %q", state, boxes[b], got, err, tr)
			}
			if !slices.Contains(lifecycleTable[got].from, state) {
				t.Errorf("next(%q, %s) = %q, whose row does not start from %q", state, boxes[b], got, state)
			}
		}
	}
	if _, err := next("melted", boxRunning); err == nil || !strings.Contains(err.Error(), `"melted"`) {
		t.Errorf("an unknown state: %v", err)
	}
}

// Every transition a call takes ends where its row says, records what its row says,
// and hands the sandbox out busy, with what the model must know in its notes.
func TestAcquireTransitions(t *testing.T) {
	cases := []struct {
		name      string
		state     string // "" for no record
		box       string // the backend's status, or "gone"
		uncertain []string
		setup     func(x *machine)
		via       transition
		kinds     []string
		gen       int64
		note      string
	}{
		{name: "first call provisions", via: tProvision, kinds: []string{events.KindSandboxProvisioned}, gen: 1,
			note: `provisioned for this session from environment "env", snapshot snap-1`},
		{name: "running is attached", state: store.SandboxStateRunning, box: sandbox.SandboxRunning, via: tAttach, gen: 1},
		{name: "a running record with a stopped box is resumed", state: store.SandboxStateRunning, box: sandbox.SandboxStopped, via: tResume,
			kinds: []string{events.KindSandboxResumed}, gen: 1, note: "was stopped and has been resumed with its files"},
		{name: "stopped is resumed", state: store.SandboxStateStopped, box: sandbox.SandboxStopped, via: tResume,
			kinds: []string{events.KindSandboxResumed}, gen: 1, note: "was stopped and has been resumed with its files, from snapshot snap-1."},
		{name: "archived is resumed", state: store.SandboxStateArchived, box: sandbox.SandboxArchived, via: tResume,
			kinds: []string{events.KindSandboxResumed}, gen: 1, note: "was archived and has been resumed"},
		{name: "a stopped record whose box runs is settled", state: store.SandboxStateStopped, box: sandbox.SandboxRunning, via: tSettle, gen: 1},
		{name: "deleted is recreated without a loss", state: store.SandboxStateDeleted, box: "gone", via: tRecreate,
			kinds: []string{events.KindSandboxProvisioned}, gen: 2, note: "was deleted after being idle; this is a fresh workspace from snapshot snap-1"},
		{name: "a box the backend lost is recreated", state: store.SandboxStateStopped, box: "gone", via: tRecreate,
			kinds: []string{events.KindSandboxLost, events.KindSandboxProvisioned}, gen: 2, note: "was lost; this is a fresh workspace"},
		{name: "lost and running is recovered", state: store.SandboxStateLost, box: sandbox.SandboxRunning, uncertain: []string{"out.txt"}, via: tRecover,
			kinds: []string{events.KindSandboxRecovered}, gen: 1, note: "has been recovered with its files. These files were being written when it failed and may be incomplete: [out.txt]."},
		{name: "lost and stopped is started by the check and recovered", state: store.SandboxStateLost, box: sandbox.SandboxStopped, via: tRecover,
			kinds: []string{events.KindSandboxRecovered}, gen: 1, note: "has been recovered with its files"},
		{name: "lost and reported down after the check is resumed", state: store.SandboxStateLost, box: sandbox.SandboxStopped, uncertain: []string{"a"},
			setup: func(x *machine) { x.rt.reportDown = true }, via: tRecover, kinds: []string{events.KindSandboxResumed}, gen: 1,
			note: "died during an earlier call and was recovered with its files. These files were being written when it died"},
		{name: "lost and unhealthy is recreated", state: store.SandboxStateLost, box: sandbox.SandboxRunning,
			setup: func(x *machine) { x.rt.unhealthy = true }, via: tRecreate,
			kinds: []string{events.KindSandboxLost, events.KindSandboxProvisioned}, gen: 2, note: "could not be recovered"},
		{name: "lost and gone is recreated", state: store.SandboxStateLost, box: "gone", via: tRecreate,
			kinds: []string{events.KindSandboxLost, events.KindSandboxProvisioned}, gen: 2, note: "was lost"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := newMachine(t)
			if c.state != noRecord {
				x.at(t, c.state, c.box, c.uncertain...)
			}
			if c.setup != nil {
				c.setup(x)
			}
			l, err := x.acquire(t)
			if err != nil {
				t.Fatal(err)
			}
			if l.via != c.via {
				t.Errorf("via %q, want %q", l.via, c.via)
			}
			if got := x.kinds(); !slices.Equal(got, c.kinds) || !allowed(c.via, got) {
				t.Errorf("events %v, want %v (row %v)", got, c.kinds, lifecycleTable[c.via].events)
			}
			rec := x.record(t)
			if rec.State != lifecycleTable[c.via].to || rec.Generation != c.gen || rec.ActiveExecs != 0 {
				t.Errorf("record %s, generation %d, %d execs; want %s, %d, 0", rec.State, rec.Generation, rec.ActiveExecs, lifecycleTable[c.via].to, c.gen)
			}
			if st := x.rt.status(rec.SandboxID); st != sandbox.SandboxRunning {
				t.Errorf("box %s is %s", rec.SandboxID, st)
			}
			if c.note == "" && len(l.Notes) > 0 || c.note != "" && !strings.Contains(strings.Join(l.Notes, "\n"), c.note) {
				t.Errorf("notes %q, want %q", l.Notes, c.note)
			}
			if c.gen > 1 && x.rt.status(sandboxID(sessionID, 1)) != "gone" {
				t.Errorf("the replaced box is %s", x.rt.status(sandboxID(sessionID, 1)))
			}
		})
	}
}
