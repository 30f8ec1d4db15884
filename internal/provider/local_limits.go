package provider

import (
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/local"
)

// The local backend enforces an environment's cpu, memory and disk on each sandbox with
// cgroups (and, as root, a disk image). A user without a writable cgroup gets only what
// rlimits can do, as under rootless container engines: the sandbox runs with the limits
// that can be enforced, unless the sandbox provider's require_limits asks to refuse it.
// Plan tells which case applies, once: when a local sandbox provider is created (for its
// default environment) or its require_limits changes, and when an environment on one is
// created or resized.

const (
	summaryLimitsNotEnforced = "Sandbox Limits Not Enforced On This Host"
	summaryLimitsRefused     = "Sandbox Limits Cannot Be Enforced"
)

// probeLimits answers which limits a local sandbox created now by this process would run
// without (local.ProbeLimits, unless a test replaced it).
func (cp *controlPlane) probeLimits(lim sandbox.Limits) []sandbox.UnenforcedLimit {
	if cp != nil && cp.limitsProbe != nil {
		return cp.limitsProbe(lim)
	}
	return local.ProbeLimits(lim)
}

// sandboxLimits are the limits the harness asks of a sandbox of an environment of these
// sizes (cpu in CPUs, memory and disk in GB), as lifecycle.Manager does.
func sandboxLimits(cpu, memoryGB, diskGB int64) sandbox.Limits {
	return sandbox.Limits{CPU: cpu, MemoryMB: memoryGB * 1024, DiskMB: diskGB * 1024}
}

// boolPointer maps an optional bool attribute to the store's setting (nil when unset).
func boolPointer(v types.Bool) *bool {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	b := v.ValueBool()
	return &b
}

func optionalBool(b *bool) types.Bool {
	if b == nil {
		return types.BoolNull()
	}
	return types.BoolValue(*b)
}

// localLimitsDiags is the plan's one diagnostic about the limits of the sandboxes of
// environment env (sizes in CPUs and GB) on local sandbox provider providerName, whose
// require_limits is require (nil: unset): nothing when every limit can be enforced, a
// warning listing what cannot and why, or an error when limits are required.
func (cp *controlPlane) localLimitsDiags(providerName string, require *bool, env string, cpu, memoryGB, diskGB int64) diag.Diagnostics {
	var diags diag.Diagnostics
	unenforced := cp.probeLimits(sandboxLimits(cpu, memoryGB, diskGB))
	if len(unenforced) == 0 {
		return diags
	}
	var names, lines []string
	for _, u := range unenforced {
		names = append(names, u.Limit)
		lines = append(lines, "  - "+u.String())
	}
	what := fmt.Sprintf("The sandboxes of environment %q (%d CPU, %d GB memory, %d GB disk) cannot have their %s limit(s) enforced "+
		"on this host by the user running Terraform (uid %d):\n\n%s\n\n",
		env, cpu, memoryGB, diskGB, strings.Join(names, ", "), os.Geteuid(), strings.Join(lines, "\n"))
	enforce := "run Terraform and trueforge-harness as root, or as a user with a delegated cgroup v2 subtree " +
		"(for example under `systemd-run --user --scope -p Delegate=yes`)"
	if local.RequireLimitsFor(require) {
		why := "require_limits = true"
		if require == nil {
			why = "require_limits is unset and Terraform runs as root, which requires them"
		}
		diags.AddError(summaryLimitsRefused, what+fmt.Sprintf(
			"Sandbox provider %q requires limits (%s), so the harness would refuse every such sandbox. To enforce them, %s. "+
				"To run sandboxes with the limits that can be enforced instead, set require_limits = false on the sandbox provider.",
			providerName, why, enforce))
		return diags
	}
	diags.AddWarning(summaryLimitsNotEnforced, what+fmt.Sprintf(
		"These sandboxes still start, with the limits that can be enforced (as under rootless container engines), and the harness "+
			"records what is not enforced on each sandbox's sandbox_provisioned event. To enforce every limit, %s. "+
			"To refuse such sandboxes instead, set require_limits = true on sandbox provider %q. "+
			"The harness checks again, for its own user, whenever it creates a sandbox.",
		enforce, providerName))
	return diags
}
