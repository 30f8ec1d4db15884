package lifecycle

import (
	"slices"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// StopNow stops a sandbox that was used this very moment (no idle time required), by the
// idle-stop row of the table; one running a command is left running and said busy; a
// stopped one is left as it is.
func TestStopNow(t *testing.T) {
	x := newMachine(t)
	x.at(t, store.SandboxStateRunning, sandbox.SandboxRunning)
	if ok, err := x.st.BeginSandboxUse(t.Context(), sessionID, ProcessOwner(), x.now); err != nil || !ok {
		t.Fatalf("busy mark: %v %v", ok, err)
	}
	stopped, busy, err := x.m.StopNow(t.Context(), sessionID)
	if err != nil || stopped || !busy {
		t.Fatalf("a busy sandbox: stopped %v busy %v err %v; want left running, busy", stopped, busy, err)
	}
	if st := x.rt.status(sandboxID(sessionID, 1)); st != sandbox.SandboxRunning {
		t.Fatalf("busy box %s, want running", st)
	}
	if err := x.st.EndSandboxUse(t.Context(), sessionID, x.now); err != nil {
		t.Fatal(err)
	}
	stopped, busy, err = x.m.StopNow(t.Context(), sessionID)
	if err != nil || !stopped || busy {
		t.Fatalf("an idle sandbox used just now: stopped %v busy %v err %v; want stopped", stopped, busy, err)
	}
	if rec := x.record(t); rec.State != store.SandboxStateStopped {
		t.Fatalf("record %s, want stopped", rec.State)
	}
	if st := x.rt.status(sandboxID(sessionID, 1)); st != sandbox.SandboxStopped {
		t.Fatalf("box %s, want stopped", st)
	}
	if got, want := x.kinds(), lifecycleTable[tIdleStop].events; !slices.Equal(got, want) {
		t.Errorf("events %v, want the idle-stop row's %v", got, want)
	}
	stopped, busy, err = x.m.StopNow(t.Context(), sessionID)
	if err != nil || stopped || busy {
		t.Fatalf("a stopped sandbox: stopped %v busy %v err %v; want nothing done", stopped, busy, err)
	}
}
