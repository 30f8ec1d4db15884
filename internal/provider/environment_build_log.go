package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// logBuild logs how long an environment's build took in this operation, through tflog
// (TF_LOG_PROVIDER=INFO shows it): from the build's start (claiming the snapshot) to its
// Ready or Failed, or, when the operation did not wait for the end (wait_for_ready =
// false, a timeout), to when it stopped waiting, with finished false. A snapshot that
// was Ready at once (the same inputs built before) took no build and is logged so.
//
// Builds run in the provider, not in the harness, so these lines are where build
// durations are recorded; the harness's /metrics has none.
func logBuild(ctx context.Context, environment string, snap store.Snapshot, began time.Time) {
	finished := snap.Status == sandbox.StatusReady || snap.Status == sandbox.StatusFailed
	fields := map[string]any{
		"environment": environment, "snapshot_id": snap.ID, "status": snap.Status,
		"build_seconds": time.Since(began).Seconds(), "finished": finished,
	}
	switch {
	case snap.Status == sandbox.StatusFailed:
		tflog.Warn(ctx, "environment: build failed", fields)
	case finished:
		tflog.Info(ctx, "environment: build finished", fields)
	default:
		tflog.Info(ctx, "environment: build still running", fields)
	}
}
