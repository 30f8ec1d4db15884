package lifecycle

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

var errBackend = errors.New("backend unavailable")

// A transition that fails leaves the record where a later call can take it again, says
// what failed, and records nothing it did not do.
func TestAcquireTransitionFailures(t *testing.T) {
	cases := []struct {
		name  string
		state string // "" for no record
		box   string
		fail  string // the runtime method that fails with errBackend
		setup func(x *machine)
		// want: the error wraps errBackend (or, when wantText is set, says it).
		wantText string
		// then: the record's state and generation afterwards ("" for none).
		then  string
		gen   int64
		kinds []string
	}{
		{name: "provision: create fails", fail: "Create", then: ""},
		{name: "attach: the backend cannot be asked", state: store.SandboxStateRunning, box: sandbox.SandboxRunning, fail: "Get", then: store.SandboxStateRunning, gen: 1},
		{name: "resume: start fails", state: store.SandboxStateArchived, box: sandbox.SandboxArchived, fail: "Start", then: store.SandboxStateArchived, gen: 1},
		{name: "recreate: create fails after a delete", state: store.SandboxStateDeleted, box: "gone", fail: "Create", then: store.SandboxStateDeleted, gen: 1},
		{name: "recreate: create fails after a loss", state: store.SandboxStateRunning, box: "gone", fail: "Create", then: store.SandboxStateRunning, gen: 1,
			kinds: []string{events.KindSandboxLost}},
		{name: "recover: the replacement fails, the claim is handed back", state: store.SandboxStateLost, box: sandbox.SandboxRunning,
			setup: func(x *machine) { x.rt.unhealthy = true; x.rt.fail["Create"] = errBackend }, then: store.SandboxStateLost, gen: 1,
			kinds: []string{events.KindSandboxLost}},
		{name: "recover: start fails after the check, the claim is handed back", state: store.SandboxStateLost, box: sandbox.SandboxRunning,
			setup: func(x *machine) { x.rt.reportDown = true }, fail: "", then: store.SandboxStateLost, gen: 1},
		{name: "wait: a change that does not land", state: store.SandboxStateChanging, box: sandbox.SandboxRunning, wantText: "still changing state",
			then: store.SandboxStateChanging, gen: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := newMachine(t)
			if c.state != noRecord {
				x.at(t, c.state, c.box)
			}
			if c.fail != "" {
				x.rt.fail[c.fail] = errBackend
			}
			if c.setup != nil {
				c.setup(x)
			}
			if strings.HasPrefix(c.name, "recover: start fails") {
				// The check passes on a box the backend then reports down, and its start fails.
				x.rt.failAfter("Start", 1, errBackend)
			}
			_, err := x.acquire(t)
			switch {
			case c.wantText != "" && (err == nil || !strings.Contains(err.Error(), c.wantText)):
				t.Fatalf("err %v, want one saying %q", err, c.wantText)
			case c.wantText == "" && !errors.Is(err, errBackend):
				t.Fatalf("err %v, want %v", err, errBackend)
			}
			rec, rerr := x.st.GetSessionSandbox(t.Context(), sessionID)
			if c.then == "" {
				if rerr == nil {
					t.Errorf("a record was left: %+v", rec)
				}
			} else if rerr != nil || rec.State != c.then || rec.Generation != c.gen || rec.ActiveExecs != 0 {
				t.Errorf("record %s gen %d execs %d (%v), want %s gen %d", rec.State, rec.Generation, rec.ActiveExecs, rerr, c.then, c.gen)
			}
			if got := x.kinds(); !slices.Equal(got, c.kinds) {
				t.Errorf("events %v, want %v", got, c.kinds)
			}
		})
	}
}

// A cancelled health check hands the claim back: the record is lost again, for the
// next call, and the box is not replaced.
func TestRecoverCancelledHandsTheClaimBack(t *testing.T) {
	x := newMachine(t)
	x.at(t, store.SandboxStateLost, sandbox.SandboxRunning)
	ctx, cancel := context.WithCancel(t.Context())
	x.rt.onExec = func() { cancel() }
	x.rt.fail["Exec"] = context.Canceled
	if _, err := x.m.Acquire(ctx, sessionID, x.agent); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if rec := x.record(t); rec.State != store.SandboxStateLost || rec.Generation != 1 {
		t.Errorf("record %s gen %d, want lost gen 1", rec.State, rec.Generation)
	}
	if st := x.rt.status(sandboxID(sessionID, 1)); st != sandbox.SandboxRunning {
		t.Errorf("the box was touched: %s", st)
	}
}

// A change older than StaleChange is a reaper that died midway: the call takes it
// over as a loss and recovers the box with its files.
func TestStaleChangeIsTakenOverAndRecovered(t *testing.T) {
	x := newMachine(t)
	x.at(t, store.SandboxStateChanging, sandbox.SandboxRunning)
	x.now = x.now.Add(StaleChange + time.Minute)
	l, err := x.acquire(t)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := x.kinds(), []string{events.KindSandboxLost, events.KindSandboxRecovered}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if l.via != tRecover || x.record(t).State != store.SandboxStateRunning || x.record(t).Generation != 1 {
		t.Errorf("via %s, record %+v", l.via, x.record(t))
	}
}

// sandbox_resumed says what the box was before it was started, as its field's comment
// promises (it once said Running, read after the start).
func TestResumedSaysWhatTheBoxWas(t *testing.T) {
	x := newMachine(t)
	x.at(t, store.SandboxStateStopped, sandbox.SandboxArchived)
	l, err := x.acquire(t)
	if err != nil {
		t.Fatal(err)
	}
	x.mu.Lock()
	ev, ok := x.events[0].(events.SandboxResumed)
	x.mu.Unlock()
	if !ok || ev.From != sandbox.SandboxArchived || ev.RecordedState != store.SandboxStateStopped {
		t.Errorf("event %+v", x.events[0])
	}
	if !strings.Contains(l.Notes[0], "was archived and has been resumed") {
		t.Errorf("note %q", l.Notes[0])
	}
}
