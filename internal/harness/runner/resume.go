package runner

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// InterruptedResult is the synthetic result of a tool call whose harness died.
const InterruptedResult = "interrupted: the harness stopped before this call finished; its effect is unknown, retry it if still needed"

// Heartbeats: a running run's row is stamped every HeartbeatEvery by the process
// running it. Another process takes the run for dead, and repairs its session, when
// that process is gone (OwnerAlive, for a process in its own pid space) or, for one it
// cannot check (another machine or container), when the last heartbeat is older than
// the heartbeat timeout. Heartbeats are stamped and judged with each process's own
// clock, so replicas' clocks must agree to well within the timeout (NTP does).
const (
	// DefaultHeartbeatEvery is how often a run's process stamps its heartbeat.
	DefaultHeartbeatEvery = 10 * time.Second
	// DefaultHeartbeatTimeout is how long a run may go without a heartbeat before any
	// other harness marks it interrupted: twelve missed heartbeats.
	DefaultHeartbeatTimeout = 2 * time.Minute
)

// repairWait bounds how long a repair waits for another process that is repairing the
// same session (a repair takes milliseconds, plus a sandbox stop and start when it
// reclaims one).
const repairWait = 10 * time.Second

// sessionLeaseName is the lease a harness holds while it repairs a session, so that of
// two replicas that find the same dead run, one repairs it.
func sessionLeaseName(sessionID string) string { return "session/" + sessionID }

// Repair makes a session safe to continue: runs whose harness is gone are marked
// interrupted, and tool calls without a result get an error result. It returns how many
// entries it added, and ErrBusy when a live harness is running the session.
func (r *Runner) Repair(ctx context.Context, sessionID string) (int, error) {
	n, _, err := r.repairEvents(ctx, sessionID)
	return n, err
}

// repair repairs the session and returns its events afterwards.
func (r *Runner) repair(ctx context.Context, sessionID string) ([]store.Event, error) {
	_, evs, err := r.repairEvents(ctx, sessionID)
	return evs, err
}

func (r *Runner) repairEvents(ctx context.Context, sessionID string) (int, []store.Event, error) {
	var reclaim reclaimer
	if r.Tools != nil && r.Tools.Sandboxes != nil {
		reclaim = r.Tools.Sandboxes.Reclaim
	}
	return repair(ctx, r.Store, sessionID, r.owner(), r.StaleAfter, reclaim, r.logger())
}

// reclaimer stops what dead harnesses left running in a session's sandbox
// (lifecycle.Manager.Reclaim).
type reclaimer func(ctx context.Context, sessionID string, dead ...string) (bool, error)

// Repair is Runner.Repair for callers without a Runner (sessions show). self is this
// process's owner name; staleAfter <= 0 means DefaultHeartbeatTimeout.
func Repair(ctx context.Context, st *store.Store, sessionID, self string, staleAfter time.Duration) (int, error) {
	n, _, err := repair(ctx, st, sessionID, self, staleAfter, nil, nil)
	return n, err
}

// stale reports whether a running run's harness is gone, as seen from process self: the
// run is this process's but no Run here executes it, its owner is dead, or its last
// heartbeat is older than staleAfter.
func stale(run store.Run, self string, staleAfter time.Duration) bool {
	_, here := liveRuns.Load(run.ID)
	return (run.Owner == self && !here) || !lifecycle.OwnerAlive(run.Owner) || time.Since(run.HeartbeatAt) > staleAfter
}

// repair returns what Repair does and the session's events afterwards. The common case,
// nothing to repair, costs two reads; a repair runs under the session's lease, from the
// runs and events as they are once it is held. Commands a dead harness left running in
// the session's sandbox are stopped (reclaim, when given) before the session goes on;
// the owners of the session's interrupted runs count as dead for that, since their
// runs were ended for them.
func repair(ctx context.Context, st *store.Store, sessionID, self string, staleAfter time.Duration, reclaim reclaimer, logger *slog.Logger) (int, []store.Event, error) {
	if staleAfter <= 0 {
		staleAfter = DefaultHeartbeatTimeout
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	runs, evs, work, err := repairState(ctx, st, sessionID, self, staleAfter)
	if err != nil {
		return 0, nil, err
	}
	added := 0
	if work {
		release, err := waitSessionLease(ctx, st, sessionID, self)
		if err != nil {
			return 0, nil, err
		}
		defer release()
		if runs, evs, work, err = repairState(ctx, st, sessionID, self, staleAfter); err != nil {
			return 0, nil, err
		}
		if work {
			if added, err = repairRuns(ctx, st, sessionID, self, staleAfter, runs, evs); err != nil {
				return added, nil, err
			}
		}
	}
	if reclaim != nil {
		if _, err := reclaim(ctx, sessionID, interruptedOwners(runs)...); err != nil {
			logger.Warn("reclaiming the sandbox of an interrupted run", "session", sessionID, "err", err)
		}
	}
	if added > 0 {
		if evs, err = st.Events(ctx, sessionID, 0); err != nil {
			return added, nil, err
		}
	}
	return added, evs, nil
}

// repairState reads a session's runs and events and says whether there is anything to
// repair: a running run whose harness is gone, or a tool call without a result. A live
// running run is ErrBusy.
func repairState(ctx context.Context, st *store.Store, sessionID, self string, staleAfter time.Duration) ([]store.Run, []store.Event, bool, error) {
	runs, err := st.Runs(ctx, sessionID)
	if err != nil {
		return nil, nil, false, err
	}
	work := false
	for _, run := range runs {
		if run.Status != store.RunRunning {
			continue
		}
		if !stale(run, self, staleAfter) {
			return nil, nil, false, fmt.Errorf("%w: run %s of session %s is running in harness process %s (last heartbeat %s ago); wait for it or cancel it there",
				ErrBusy, run.ID, sessionID, run.Owner, time.Since(run.HeartbeatAt).Round(time.Second))
		}
		work = true
	}
	evs, err := st.Events(ctx, sessionID, 0)
	if err != nil {
		return nil, nil, false, err
	}
	return runs, evs, work || len(dangling(evs)) > 0, nil
}

// repairRuns marks the stale running runs interrupted and gives dangling calls their
// interrupted result, returning how many entries it added.
func repairRuns(ctx context.Context, st *store.Store, sessionID, self string, staleAfter time.Duration, runs []store.Run, evs []store.Event) (int, error) {
	added := 0
	for _, run := range runs {
		if run.Status != store.RunRunning {
			continue
		}
		ok, err := st.EndRun(ctx, run.ID, store.RunInterrupted, "its harness process stopped mid-run")
		if err != nil {
			return added, err
		}
		if ok {
			reason := "its harness process stopped mid-run"
			if lifecycle.OwnerAlive(run.Owner) && run.Owner != self {
				reason = fmt.Sprintf("its harness process sent no heartbeat for %s (timeout %s)", time.Since(run.HeartbeatAt).Round(time.Second), staleAfter)
			}
			if _, err := events.Append(ctx, st, sessionID, run.ID, events.RunInterrupted{RunID: run.ID, Owner: run.Owner, Reason: reason}); err != nil {
				return added, err
			}
			added++
		}
	}
	for _, d := range dangling(evs) {
		if _, err := events.Append(ctx, st, sessionID, d.runID, events.ToolResult{ID: d.call.ID, Name: d.call.Name,
			Text: InterruptedResult, IsError: true, FullSize: len(InterruptedResult), Synthetic: true}); err != nil {
			return added, err
		}
		added++
	}
	return added, nil
}

// interruptedOwners are the owners of a session's interrupted runs (after repairRuns,
// the runs it ended count too: their rows were read before, as running).
func interruptedOwners(runs []store.Run) []string {
	var out []string
	for _, run := range runs {
		if run.Status == store.RunInterrupted || run.Status == store.RunRunning {
			out = append(out, run.Owner)
		}
	}
	return out
}

// waitSessionLease takes the session's repair lease for a holder unique to this call,
// waiting up to repairWait for another repair of the session to finish.
func waitSessionLease(ctx context.Context, st *store.Store, sessionID, self string) (func(), error) {
	name, holder := sessionLeaseName(sessionID), self+"/repair-"+randHex(4)
	deadline := time.Now().Add(repairWait)
	for {
		release, ok, err := lifecycle.HoldLease(ctx, st, name, holder, lifecycle.DefaultLeaseTTL, nil)
		if err != nil {
			return nil, err
		}
		if ok {
			return release, nil
		}
		if time.Now().After(deadline) {
			l, _ := st.GetLease(ctx, name)
			return nil, fmt.Errorf("%w: harness process %s has been repairing session %s for over %s; try again", ErrBusy, l.Holder, sessionID, repairWait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

type danglingCall struct {
	call  model.ToolCall
	runID string
}

// dangling lists the tool calls of model messages that have no result, in order.
func dangling(evs []store.Event) []danglingCall {
	var calls []danglingCall
	done := map[string]bool{}
	for _, e := range evs {
		if p, ok := events.As[events.ModelMessage](e.Kind, e.Payload); ok {
			for _, tc := range p.ToolCalls {
				calls = append(calls, danglingCall{tc, e.RunID})
			}
		} else if p, ok := events.As[events.ToolResult](e.Kind, e.Payload); ok {
			done[p.ID] = true
		}
	}
	var out []danglingCall
	for _, c := range calls {
		if !done[c.call.ID] {
			out = append(out, c)
		}
	}
	return out
}

// History rebuilds the model conversation from a session's events. A tool call without
// a result (only possible before Repair) gets the interrupted result, so the history is
// always valid for the model APIs.
func History(evs []store.Event) []model.Message {
	var msgs []model.Message
	results := map[string]model.Message{}
	for _, e := range evs {
		if p, ok := events.As[events.ToolResult](e.Kind, e.Payload); ok {
			results[p.ID] = model.Message{Role: model.RoleTool, ToolCallID: p.ID, Text: p.Text, IsError: p.IsError}
		}
	}
	// What the MCP calls of a stopped script did after it, whenever it was recorded,
	// follows that script's result: the next turn knows what happened outside.
	for _, e := range evs {
		if p, ok := events.As[events.MCPCall](e.Kind, e.Payload); ok && (p.Late || p.Outcome == events.OutcomeUnknown) {
			if res, ok := results[p.ToolCallID]; ok {
				res.Text += "\n" + afterScriptNote(p)
				results[p.ToolCallID] = res
			}
		}
	}
	for _, e := range evs {
		if p, ok := events.As[events.UserMessage](e.Kind, e.Payload); ok {
			msgs = append(msgs, model.Message{Role: model.RoleUser, Text: p.ModelText()})
		} else if p, ok := events.As[events.ModelMessage](e.Kind, e.Payload); ok {
			msgs = append(msgs, model.Message{Role: model.RoleAssistant, Text: p.Text, ToolCalls: p.ToolCalls})
			// Results follow their calls directly, whatever else was logged between.
			for _, tc := range p.ToolCalls {
				res, ok := results[tc.ID]
				if !ok {
					res = model.Message{Role: model.RoleTool, ToolCallID: tc.ID, Text: InterruptedResult, IsError: true}
				}
				msgs = append(msgs, res)
			}
		}
	}
	return msgs
}

// afterScriptNote is how History reports an MCP call whose end its script did not see.
func afterScriptNote(p events.MCPCall) string {
	if !p.Late {
		return fmt.Sprintf("[harness: MCP call %d (%s) had no answer when the script ended; outcome unknown for now: %s]", p.Call, p.Tool, p.Error)
	}
	s := fmt.Sprintf("[harness: MCP call %d (%s) ended after its script did: %s", p.Call, p.Tool, p.Outcome)
	if p.Error != "" {
		s += " (" + p.Error + ")"
	} else if p.ResultBytes > 0 {
		s += fmt.Sprintf(", %d bytes of result the script never received", p.ResultBytes)
	}
	return s + "]"
}
