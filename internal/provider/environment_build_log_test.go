package provider

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflogtest"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// A build's duration reaches Terraform's provider log (tflog) as a number of seconds,
// with whether the build finished, at the level its outcome calls for.
func TestLogBuildDuration(t *testing.T) {
	for _, tc := range []struct {
		status, level, message string
		finished               bool
	}{
		{sandbox.StatusReady, "info", "environment: build finished", true},
		{sandbox.StatusFailed, "warn", "environment: build failed", true},
		{sandbox.StatusBuilding, "info", "environment: build still running", false},
	} {
		var out bytes.Buffer
		ctx := tflogtest.RootLogger(context.Background(), &out)
		logBuild(ctx, "py", store.Snapshot{ID: "snap-1", Status: tc.status}, time.Now().Add(-1500*time.Millisecond))
		entries, err := tflogtest.MultilineJSONDecode(&out)
		if err != nil || len(entries) != 1 {
			t.Fatalf("%s: %d entries, %v:\n%s", tc.status, len(entries), err, out.String())
		}
		e := entries[0]
		secs, _ := e["build_seconds"].(float64)
		if e["@message"] != tc.message || e["@level"] != tc.level || e["environment"] != "py" || e["snapshot_id"] != "snap-1" ||
			e["status"] != tc.status || e["finished"] != tc.finished || secs < 1.5 || secs > 60 {
			t.Errorf("%s: logged %v", tc.status, e)
		}
	}
}
