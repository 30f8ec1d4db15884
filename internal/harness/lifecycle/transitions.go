package lifecycle

import (
	"fmt"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// The lifecycle is a state machine over a session's sandbox record (store.SandboxState*),
// with the backend's word on the box as a second input. Every move is a compare-and-swap
// on the record, made by one of the transitions below:
//
//   - a call's Acquire takes one step (next picks it; acquire.go does it): provision,
//     attach, settle, resume, recover, recreate, or wait while another process moves it;
//   - the reaper's idle steps (reap.go): idle-stop, archive, delete;
//   - Reclaim (reclaim.go): the restart of a sandbox whose commands a dead harness left.
//
// Each row says where a transition starts, where it leaves the record, and the events it
// records, in order: the machine's tests (transitions_test.go) hold every transition to
// its row, so this table is the map of the lifecycle and not a comment that can drift.

// transition names one move of the lifecycle; lifecycleTable says what each does.
type transition string

const (
	tProvision transition = "provision"
	tAttach    transition = "attach"
	tSettle    transition = "settle"
	tResume    transition = "resume"
	tRecover   transition = "recover"
	tRecreate  transition = "recreate"
	tWait      transition = "wait"
	tIdleStop  transition = "idle-stop"
	tArchive   transition = "archive"
	tDelete    transition = "delete"
	tReclaim   transition = "reclaim"
)

// noRecord stands, in the table's from, for a session with no sandbox record yet.
const noRecord = ""

// transitionRow is one row of the lifecycle.
type transitionRow struct {
	// from are the record states the transition starts from.
	from []string
	// to is the record state it leaves on success.
	to string
	// events are the kinds it records on success, in order (each may be absent where
	// the row's comment says so).
	events []string
}

// lifecycleTable is the lifecycle, one row a transition.
var lifecycleTable = map[transition]transitionRow{
	// No record yet: the session's first sandbox is created.
	tProvision: {from: []string{noRecord}, to: store.SandboxStateRunning, events: []string{events.KindSandboxProvisioned}},
	// The record and the box both say running: the sandbox is handed out.
	tAttach: {from: []string{store.SandboxStateRunning}, to: store.SandboxStateRunning},
	// The box runs but the record says stopped or archived (a start whose record was not
	// written, a backend that started it itself): the record follows.
	tSettle: {from: []string{store.SandboxStateStopped, store.SandboxStateArchived}, to: store.SandboxStateRunning},
	// The box is stopped or archived (by the reaper, by the backend's own idle policy):
	// it is started with its files.
	tResume: {from: []string{store.SandboxStateRunning, store.SandboxStateStopped, store.SandboxStateArchived},
		to: store.SandboxStateRunning, events: []string{events.KindSandboxResumed}},
	// The box failed under an earlier call (record lost): it is claimed, health-checked
	// and handed out with its files (sandbox_recovered; sandbox_resumed when it is still
	// down after the check), or recreated when it fails the check.
	tRecover: {from: []string{store.SandboxStateLost}, to: store.SandboxStateRunning,
		events: []string{events.KindSandboxRecovered, events.KindSandboxResumed}},
	// The record is deleted, the backend no longer has the box, or a lost box failed its
	// health check: a new generation is created and the workspace reset. sandbox_lost is
	// recorded unless the record was deleted on time (nothing was lost).
	tRecreate: {from: []string{store.SandboxStateDeleted, store.SandboxStateRunning, store.SandboxStateStopped, store.SandboxStateArchived, store.SandboxStateLost},
		to: store.SandboxStateRunning, events: []string{events.KindSandboxLost, events.KindSandboxProvisioned}},
	// Another process (a reaper) is moving the sandbox: the call waits and reads the
	// record again. A change older than StaleChange is taken over as a loss.
	tWait: {from: []string{store.SandboxStateChanging}, to: store.SandboxStateLost, events: []string{events.KindSandboxLost}},
	// The reaper's steps, on the agent's timings; a lost record moves by what its box is.
	tIdleStop: {from: []string{store.SandboxStateRunning, store.SandboxStateLost}, to: store.SandboxStateStopped,
		events: []string{events.KindSandboxStopped}},
	tArchive: {from: []string{store.SandboxStateStopped, store.SandboxStateLost}, to: store.SandboxStateArchived,
		events: []string{events.KindSandboxArchived}},
	tDelete: {from: []string{store.SandboxStateStopped, store.SandboxStateArchived, store.SandboxStateLost}, to: store.SandboxStateDeleted,
		events: []string{events.KindSandboxDeleted}},
	// A running sandbox marked busy by a dead harness is stopped and started again,
	// killing the orphaned commands; files kept.
	tReclaim: {from: []string{store.SandboxStateRunning}, to: store.SandboxStateRunning, events: []string{events.KindSandboxReclaimed}},
}

// box is what the backend says of a sandbox, in the machine's terms.
type box int

const (
	boxUnasked box = iota // the record alone decides (no record, deleted, changing)
	boxGone               // the backend no longer has it
	boxRunning            // sandbox.SandboxRunning
	boxDown               // stopped, archived, or any other status but running
)

// boxOf is what a backend's status means to the machine.
func boxOf(status string) box {
	if status == sandbox.SandboxRunning {
		return boxRunning
	}
	return boxDown
}

// needsBox reports whether next needs the backend's word for a record in state.
func needsBox(state string) bool {
	switch state {
	case store.SandboxStateRunning, store.SandboxStateStopped, store.SandboxStateArchived, store.SandboxStateLost:
		return true
	}
	return false
}

// next is the transition a call's Acquire takes from a record in state, with b what the
// backend says of the box (boxUnasked where needsBox is false).
func next(state string, b box) (transition, error) {
	switch state {
	case noRecord:
		return tProvision, nil
	case store.SandboxStateChanging:
		return tWait, nil
	case store.SandboxStateDeleted:
		return tRecreate, nil
	case store.SandboxStateRunning, store.SandboxStateStopped, store.SandboxStateArchived, store.SandboxStateLost:
	default:
		return "", fmt.Errorf("unknown sandbox state %q", state)
	}
	switch {
	case b == boxUnasked:
		return "", fmt.Errorf("a %s sandbox needs the backend's status", state)
	case b == boxGone:
		return tRecreate, nil
	case state == store.SandboxStateLost:
		return tRecover, nil
	case b == boxDown:
		return tResume, nil
	case state == store.SandboxStateRunning:
		return tAttach, nil
	}
	return tSettle, nil
}
