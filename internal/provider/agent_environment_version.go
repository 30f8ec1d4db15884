package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// An agent's sandbox.environment_version pins its new sandboxes to one kept version of
// its environment (issue 28; the harness resolves it in agents.pinVersion). Plan and
// apply refuse a pin that is not a kept version: its snapshot is, or is about to be,
// collected, and no session could start from it.

const environmentVersionDoc = "Pin the agent's new sandboxes to one version of `environment`: a `build_hash` or `snapshot_id` from the environment's `versions` " +
	"(for example `trueforge_environment.py.versions[1].build_hash`, the previous one). It must be a kept version (`kept = true`: the current one or one of " +
	"the environment's `keep_versions` latest previous ones); plan refuses one that is not, since its snapshot is collected. While the agent pins it, " +
	"the version stays kept past `keep_versions` (its `pinned_by` names the agent), whichever team owns the environment. Sessions keep that snapshot while " +
	"the environment moves on; its `env`, `network`, secrets and volumes are the environment's current ones. Omitted, sandboxes follow the current version. " +
	"Used only with `enabled = true`."

// checkEnvironmentVersion adds an error when the agent's sandbox pins a version of env
// that is not kept. An environment or pin not known yet (created in the same apply) is
// checked at apply time.
func (r *agentResource) checkEnvironmentVersion(ctx context.Context, agent string, sb agentSandboxModel, diags *diag.Diagnostics) bool {
	if sb.EnvironmentVersion.IsNull() || sb.EnvironmentVersion.IsUnknown() || sb.Environment.IsUnknown() || !sb.Enabled.ValueBool() {
		return true
	}
	env, ref := sb.Environment.ValueString(), sb.EnvironmentVersion.ValueString()
	at := path.Root("sandbox").AtName("environment_version")
	versions, err := r.cp.store.EnvironmentVersions(ctx, env)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		addOperationError(diags, "Error Checking Environment Version", fmt.Sprintf("agent %q, the versions of environment %q", agent, env), err)
		return false
	}
	var kept []string
	for _, v := range versions {
		if v.Kept {
			kept = append(kept, v.SnapshotID+" ("+v.BuildHash+")")
		}
		if v.SnapshotID != ref && v.BuildHash != ref {
			continue
		}
		if v.Kept {
			return true
		}
		diags.AddAttributeError(at, "Environment Version Not Kept", fmt.Sprintf(
			"sandbox.environment_version of agent %q pins version %s of environment %q, which is past the environment's keep_versions: its snapshot is collected, "+
				"so no session could start from it. Pin a kept version (%s), raise keep_versions on environment %q before it moves on, or remove environment_version to follow the current version.",
			agent, v.SnapshotID, env, strings.Join(kept, ", "), env))
		return false
	}
	if len(versions) == 0 {
		// Not created yet (same apply): Create and Update check again.
		return true
	}
	diags.AddAttributeError(at, "Environment Version Not Found", fmt.Sprintf(
		"sandbox.environment_version of agent %q is %q, which is neither the snapshot id nor the build hash of a version of environment %q. "+
			"Use one from trueforge_environment.%s.versions whose kept is true (kept now: %s), or remove environment_version to follow the current version.",
		agent, ref, env, env, strings.Join(kept, ", ")))
	return false
}
