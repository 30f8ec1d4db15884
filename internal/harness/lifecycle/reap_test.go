package lifecycle

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// The reaper's steps move an idle sandbox along its row of the table on the agent's
// timings (the defaults here: the session's agent is not in the store), and a step
// whose backend call fails puts the record back as it was.
func TestReapSteps(t *testing.T) {
	minutes := func(n int) time.Duration { return time.Duration(n) * time.Minute }
	cases := []struct {
		name       string
		state, box string
		idle       time.Duration
		fail       string
		failErr    error
		via        []transition // the steps that landed, in order
		then       string       // the record's state afterwards
		boxThen    string
	}{
		{name: "idle-stop", state: store.SandboxStateRunning, box: sandbox.SandboxRunning, idle: minutes(agentspec.DefaultIdleStopMinutes),
			via: []transition{tIdleStop}, then: store.SandboxStateStopped, boxThen: sandbox.SandboxStopped},
		{name: "not yet idle", state: store.SandboxStateRunning, box: sandbox.SandboxRunning, idle: minutes(agentspec.DefaultIdleStopMinutes - 1),
			then: store.SandboxStateRunning, boxThen: sandbox.SandboxRunning},
		{name: "archive", state: store.SandboxStateStopped, box: sandbox.SandboxStopped, idle: minutes(agentspec.DefaultArchiveAfterMinutes),
			via: []transition{tArchive}, then: store.SandboxStateArchived, boxThen: sandbox.SandboxArchived},
		{name: "delete", state: store.SandboxStateArchived, box: sandbox.SandboxArchived, idle: minutes(agentspec.DefaultDeleteAfterMinutes),
			via: []transition{tDelete}, then: store.SandboxStateDeleted, boxThen: "gone"},
		{name: "every step at once", state: store.SandboxStateRunning, box: sandbox.SandboxRunning, idle: minutes(agentspec.DefaultDeleteAfterMinutes),
			via: []transition{tIdleStop, tArchive, tDelete}, then: store.SandboxStateDeleted, boxThen: "gone"},
		{name: "a lost box that still runs is stopped", state: store.SandboxStateLost, box: sandbox.SandboxRunning, idle: minutes(agentspec.DefaultIdleStopMinutes),
			via: []transition{tIdleStop}, then: store.SandboxStateStopped, boxThen: sandbox.SandboxStopped},
		{name: "a lost box that is gone is deleted on time", state: store.SandboxStateLost, box: "gone", idle: minutes(agentspec.DefaultDeleteAfterMinutes),
			via: []transition{tDelete}, then: store.SandboxStateDeleted, boxThen: "gone"},
		{name: "idle-stop fails", state: store.SandboxStateRunning, box: sandbox.SandboxRunning, idle: minutes(agentspec.DefaultIdleStopMinutes),
			fail: "Stop", failErr: errBackend, then: store.SandboxStateRunning, boxThen: sandbox.SandboxRunning},
		{name: "archive fails", state: store.SandboxStateStopped, box: sandbox.SandboxStopped, idle: minutes(agentspec.DefaultArchiveAfterMinutes),
			fail: "Archive", failErr: errBackend, then: store.SandboxStateStopped, boxThen: sandbox.SandboxStopped},
		{name: "a backend that cannot archive keeps it stopped", state: store.SandboxStateStopped, box: sandbox.SandboxStopped, idle: minutes(agentspec.DefaultArchiveAfterMinutes),
			fail: "Archive", failErr: fmt.Errorf("archive: %w", errors.ErrUnsupported), then: store.SandboxStateStopped, boxThen: sandbox.SandboxStopped},
		{name: "delete fails", state: store.SandboxStateArchived, box: sandbox.SandboxArchived, idle: minutes(agentspec.DefaultDeleteAfterMinutes),
			fail: "Delete", failErr: errBackend, then: store.SandboxStateArchived, boxThen: sandbox.SandboxArchived},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := newMachine(t)
			x.at(t, c.state, c.box)
			if c.fail != "" {
				x.rt.fail[c.fail] = c.failErr
			}
			x.now = x.now.Add(c.idle)
			trs, err := x.m.Reap(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var landed []transition
			var kinds []string
			for _, tr := range trs {
				if tr.Err != nil {
					if !errors.Is(tr.Err, c.failErr) || tr.To != tr.From {
						t.Errorf("a failed step: %+v", tr)
					}
					continue
				}
				step := reapStep(tr.To)
				row := lifecycleTable[step]
				if !slices.Contains(row.from, tr.From) {
					t.Errorf("step %s from %s is not in its row %v", step, tr.From, row.from)
				}
				landed = append(landed, step)
				kinds = append(kinds, row.events...)
			}
			if c.fail != "" && len(trs) == 0 {
				t.Error("the failed step was not reported")
			}
			if !slices.Equal(landed, c.via) {
				t.Errorf("steps %v, want %v", landed, c.via)
			}
			if got := x.kinds(); !slices.Equal(got, kinds) {
				t.Errorf("events %v, want %v", got, kinds)
			}
			if rec := x.record(t); rec.State != c.then {
				t.Errorf("record %s, want %s", rec.State, c.then)
			}
			if st := x.rt.status(sandboxID(sessionID, 1)); st != c.boxThen {
				t.Errorf("box %s, want %s", st, c.boxThen)
			}
		})
	}
}

// reapStep is the reaper's transition that leaves a record in state to.
func reapStep(to string) transition {
	for _, tr := range []transition{tIdleStop, tArchive, tDelete} {
		if lifecycleTable[tr].to == to {
			return tr
		}
	}
	return ""
}

// A busy sandbox is never reaped while its owner lives, and a stale mark is cleared.
func TestReapLeavesABusySandbox(t *testing.T) {
	x := newMachine(t)
	x.at(t, store.SandboxStateRunning, sandbox.SandboxRunning)
	if ok, err := x.st.BeginSandboxUse(t.Context(), sessionID, ProcessOwner(), x.now); err != nil || !ok {
		t.Fatal(ok, err)
	}
	x.now = x.now.Add(time.Duration(agentspec.DefaultDeleteAfterMinutes) * time.Minute)
	if trs, err := x.m.Reap(t.Context()); err != nil || len(trs) != 0 {
		t.Fatalf("reaped a busy sandbox: %+v, %v", trs, err)
	}
	if st := x.rt.status(sandboxID(sessionID, 1)); st != sandbox.SandboxRunning {
		t.Errorf("box %s", st)
	}
}

// Reclaim stops and starts a sandbox whose busy mark a dead harness left, killing its
// orphaned commands, clears the mark and records it; a live owner's sandbox, and one
// whose stop fails, are left marked.
func TestReclaim(t *testing.T) {
	for _, c := range []struct {
		name    string
		owner   string
		fail    string
		want    bool
		wantErr bool
		calls   []string
	}{
		{name: "a dead owner's commands are stopped", owner: "dead-harness", want: true,
			calls: []string{"Stop " + sandboxID(sessionID, 1), "Start " + sandboxID(sessionID, 1)}},
		{name: "a live owner is left alone", owner: ProcessOwner()},
		{name: "the stop fails", owner: "dead-harness", fail: "Stop", wantErr: true, calls: []string{"Stop " + sandboxID(sessionID, 1)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := newMachine(t)
			x.at(t, store.SandboxStateRunning, sandbox.SandboxRunning)
			if ok, err := x.st.BeginSandboxUse(t.Context(), sessionID, c.owner, x.now); err != nil || !ok {
				t.Fatal(ok, err)
			}
			if c.fail != "" {
				x.rt.fail[c.fail] = errBackend
			}
			got, err := x.m.Reclaim(t.Context(), sessionID)
			if got != c.want || (err != nil) != c.wantErr {
				t.Fatalf("Reclaim = %v, %v", got, err)
			}
			if !slices.Equal(x.rt.calls, c.calls) {
				t.Errorf("calls %v, want %v", x.rt.calls, c.calls)
			}
			rec := x.record(t)
			if marked := rec.ActiveExecs > 0; marked == c.want {
				t.Errorf("busy mark %d after reclaim %v", rec.ActiveExecs, c.want)
			}
			var kinds []string
			if c.want {
				kinds = lifecycleTable[tReclaim].events
			}
			if got := x.kinds(); !slices.Equal(got, kinds) {
				t.Errorf("events %v, want %v", got, kinds)
			}
		})
	}
}
