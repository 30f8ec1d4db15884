package runner_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// A run owned by a live harness on another host is busy while its heartbeat is fresh,
// and interrupted once the heartbeat is stale.
func TestRunOnAnotherHostIsBusyUntilItsHeartbeatIsStale(t *testing.T) {
	st := seeded(t)
	harnesstest.AddAgent(t, st, "a", "default", harnesstest.AgentSpec{"model": harnesstest.Script(text("hi"))})
	r := storeRunner(t, st, "a")
	ctx := context.Background()
	sid, _ := r.NewSession(ctx, harnesstest.Owner)
	if err := st.StartRun(ctx, store.Run{ID: "r-remote", SessionID: sid, Owner: "another-host:4242:1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(ctx, sid, "hello", nil); !errors.Is(err, runner.ErrBusy) {
		t.Fatalf("run while another host's run is alive: %v; want ErrBusy", err)
	}
	old := time.Now().Add(-3 * time.Minute).UnixMilli()
	if _, err := st.DB().ExecContext(ctx, `UPDATE session_runs SET heartbeat_at = ? WHERE id = 'r-remote'`, old); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, r, sid, "hello")
	if out.Text != "hi" {
		t.Fatalf("answer %q", out.Text)
	}
	runs, _ := st.Runs(ctx, sid)
	for _, run := range runs {
		if run.ID == "r-remote" && run.Status != store.RunInterrupted {
			t.Fatalf("runs %+v; want the stale remote run interrupted", runs)
		}
	}
	if len(runs) != 2 {
		t.Fatalf("%d runs; want 2", len(runs))
	}
}
