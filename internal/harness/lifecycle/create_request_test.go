package lifecycle

import (
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// A sandbox of a GPU environment is deleted when it stops (Daytona refuses GPU
// sandboxes that are not ephemeral); others are kept stopped for the agent's timings.
// The environment's labels never override the harness's own.
func TestLiveSettingsGPUIsEphemeralAndLabelsKeepTheHarnesss(t *testing.T) {
	for _, gpu := range []int64{0, 1} {
		a := &agents.Agent{Environment: store.Environment{Settings: store.EnvironmentSettings{
			GPU: gpu, Labels: map[string]string{"team": "data", "trueforge.session": "forged", "TrueForge.Agent": "forged"},
		}}}
		req := sandbox.CreateRequest{Labels: map[string]string{"trueforge.session": "s-1"}}
		liveSettings(&req, a, nil)
		if req.Lifecycle.DeleteOnStop != (gpu > 0) {
			t.Errorf("gpu %d: DeleteOnStop = %v", gpu, req.Lifecycle.DeleteOnStop)
		}
		if req.Labels["trueforge.session"] != "s-1" || req.Labels["team"] != "data" || req.Labels["TrueForge.Agent"] != "" {
			t.Errorf("gpu %d: labels %v", gpu, req.Labels)
		}
	}
}
