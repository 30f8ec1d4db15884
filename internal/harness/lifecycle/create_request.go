package lifecycle

import (
	"maps"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// liveSettings fills what a new sandbox takes from its environment's live settings and
// its agent, besides the snapshot and the network mode (network): the environment's
// labels under the harness's own, the CIDRs where the backend enforces the policy itself
// (a local sandbox's egress proxy gets them from sandboxnet), and the agent's lifecycle
// timings for backends that stop, archive and delete idle sandboxes themselves (Daytona),
// so that they do so with no harness running. The summary of the sandbox_provisioned
// event notes the CIDRs.
func liveSettings(req *sandbox.CreateRequest, a *agents.Agent, summary map[string]any) {
	env := a.Environment
	labels := make(map[string]string, len(env.Settings.Labels)+len(req.Labels))
	for k, v := range env.Settings.Labels {
		if !sandbox.ReservedLabel(k) {
			labels[k] = v
		}
	}
	maps.Copy(labels, req.Labels) // the harness's own win
	req.Labels = labels

	if cidrs := env.Settings.AllowCIDRs; len(cidrs) > 0 && !env.BlockAll {
		if summary != nil {
			summary["allow_cidrs"] = cidrs
		}
		if !req.BlockNetwork && req.Egress == nil {
			req.AllowCIDRs = cidrs
		}
	}
	req.Lifecycle = sandboxLifecycle(TimingsOf(a.Spec.Sandbox))
	// A GPU is held while a sandbox exists, stopped or not: Daytona makes GPU sandboxes
	// ephemeral (autoDeleteInterval 0), so the idle stop deletes them and the next call
	// that needs a sandbox gets a new one from the snapshot.
	req.Lifecycle.DeleteOnStop = env.Settings.GPU > 0
}

// sandboxLifecycle turns an agent's timings, each counted from the sandbox's last use,
// into the backend's, where archive and delete count from the stop (the idle stop comes
// first): a sandbox last used at T stops at T+IdleStop, is archived at T+Archive and
// deleted at T+Delete. A timing equal to the idle stop becomes a minute after the stop,
// the least a backend's whole-minute interval can say (0 means its default there).
func sandboxLifecycle(t Timings) sandbox.Lifecycle {
	afterStop := func(d time.Duration) time.Duration { return max(d-t.IdleStop, time.Minute) }
	return sandbox.Lifecycle{IdleStop: t.IdleStop, ArchiveAfter: afterStop(t.Archive), DeleteAfter: afterStop(t.Delete)}
}
