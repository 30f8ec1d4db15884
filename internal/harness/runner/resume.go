package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// InterruptedResult is the synthetic result of a tool call whose harness died.
const InterruptedResult = "interrupted: the harness stopped before this call finished; its effect is unknown, retry it if still needed"

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
	n, evs, err := repair(ctx, r.Store, sessionID, r.owner(), r.StaleAfter)
	if err != nil {
		return n, nil, err
	}
	if r.Tools != nil && r.Tools.Sandboxes != nil {
		// Commands a dead harness left running are stopped before the session goes on.
		if _, err := r.Tools.Sandboxes.Reclaim(ctx, sessionID); err != nil {
			r.logger().Warn("reclaiming the sandbox of an interrupted run", "session", sessionID, "err", err)
		}
	}
	if n > 0 {
		evs, err = r.Store.Events(ctx, sessionID, 0)
	}
	return n, evs, err
}

// Repair is Runner.Repair for callers without a Runner (sessions show). self is this
// process's owner name; staleAfter <= 0 means 2 min.
func Repair(ctx context.Context, st *store.Store, sessionID, self string, staleAfter time.Duration) (int, error) {
	n, _, err := repair(ctx, st, sessionID, self, staleAfter)
	return n, err
}

// repair returns what Repair does and the events it read (before its own additions).
func repair(ctx context.Context, st *store.Store, sessionID, self string, staleAfter time.Duration) (int, []store.Event, error) {
	if staleAfter <= 0 {
		staleAfter = 2 * time.Minute
	}
	runs, err := st.Runs(ctx, sessionID)
	if err != nil {
		return 0, nil, err
	}
	added := 0
	for _, run := range runs {
		if run.Status != store.RunRunning {
			continue
		}
		_, here := liveRuns.Load(run.ID)
		stale := (run.Owner == self && !here) || !lifecycle.OwnerAlive(run.Owner) || time.Since(run.HeartbeatAt) > staleAfter
		if !stale {
			return added, nil, fmt.Errorf("%w: run %s of session %s is running in harness process %s (last heartbeat %s ago); wait for it or cancel it there",
				ErrBusy, run.ID, sessionID, run.Owner, time.Since(run.HeartbeatAt).Round(time.Second))
		}
		ok, err := st.EndRun(ctx, run.ID, store.RunInterrupted, "its harness process stopped mid-run")
		if err != nil {
			return added, nil, err
		}
		if ok {
			if _, err := events.Append(ctx, st, sessionID, run.ID, events.RunInterrupted{RunID: run.ID, Owner: run.Owner,
				Reason: "its harness process stopped mid-run"}); err != nil {
				return added, nil, err
			}
			added++
		}
	}
	evs, err := st.Events(ctx, sessionID, 0)
	if err != nil {
		return added, nil, err
	}
	for _, d := range dangling(evs) {
		if _, err := events.Append(ctx, st, sessionID, d.runID, events.ToolResult{ID: d.call.ID, Name: d.call.Name,
			Text: InterruptedResult, IsError: true, FullSize: len(InterruptedResult), Synthetic: true}); err != nil {
			return added, nil, err
		}
		added++
	}
	return added, evs, nil
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
	for _, e := range evs {
		if p, ok := events.As[events.UserMessage](e.Kind, e.Payload); ok {
			msgs = append(msgs, model.Message{Role: model.RoleUser, Text: p.Text})
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
