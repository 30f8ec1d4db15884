package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// A cancel asked through the run's row (as another replica asks) cancels the run at its
// next heartbeat; the run id the caller chose (RunAs) is the one recorded.
func TestCancelRequestedThroughTheRowCancelsTheRun(t *testing.T) {
	st := seeded(t)
	harnesstest.AddAgent(t, st, "slow", "default", harnesstest.AgentSpec{"model": harnesstest.Script(
		map[string]any{"text": "late", "delay_ms": 30000})})
	r := storeRunner(t, st, "slow")
	r.HeartbeatEvery = 20 * time.Millisecond
	ctx := context.Background()
	sid, _ := r.NewSession(ctx, harnesstest.Owner)
	runID := runner.NewRunID()
	type result struct {
		out runner.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := r.RunAs(ctx, runID, sid, "go", nil)
		done <- result{out, err}
	}()
	sandboxtest.WaitFor(t, "the run to start", 5*time.Second, func() bool {
		run, err := st.RunningRun(ctx, sid)
		return err == nil && run.ID == runID
	})
	if ok, err := st.RequestCancel(ctx, runID); err != nil || !ok {
		t.Fatalf("request cancel: %v, %v", ok, err)
	}
	select {
	case res := <-done:
		if res.err != nil || res.out.Status != store.RunCancelled || res.out.RunID != runID {
			t.Fatalf("run: %+v, %v; want run %s cancelled", res.out, res.err, runID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not end after its cancel was requested")
	}
	if p := harnesstest.Payloads(t, st, sid, events.KindCancelled); len(p) != 1 || p[0]["run_id"] != runID {
		t.Fatalf("cancelled events: %v", p)
	}
}
