package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// Daytona's limits that an environment can hit. maxDaytonaDomains is the API's hard limit
// on domainAllowList entries (400 at sandbox creation otherwise); the size figures are the
// default per-sandbox caps of a Daytona organization, which an organization may have
// raised, so exceeding them only warns.
const (
	maxDaytonaDomains  = 10
	daytonaDefaultCPU  = 4
	daytonaDefaultMem  = 8
	daytonaDefaultDisk = 10
)

// checkDaytonaLimits reports, at plan time, what Daytona would refuse when this
// environment's sandboxes are created. It only applies when the environment's sandbox
// provider is a Daytona one (and is known: one created in the same apply is checked again
// by Create).
func (r *environmentResource) checkDaytonaLimits(ctx context.Context, plan *environmentModel, resp *resource.ModifyPlanResponse) {
	if plan.SandboxProvider.IsUnknown() {
		return
	}
	p, err := r.cp.store.GetSandboxProvider(ctx, plan.SandboxProvider.ValueString())
	if err != nil || p.Type != typeDaytona {
		return
	}
	_, allow := plan.network(ctx)
	resp.Diagnostics.Append(daytonaNetworkDiags(allow)...)
	var sizes []string
	if v := plan.CPU.ValueInt64(); v > daytonaDefaultCPU {
		sizes = append(sizes, fmt.Sprintf("cpu = %d (default cap %d)", v, daytonaDefaultCPU))
	}
	if v := plan.Memory.ValueInt64(); v > daytonaDefaultMem {
		sizes = append(sizes, fmt.Sprintf("memory = %d GB (default cap %d)", v, daytonaDefaultMem))
	}
	if v := plan.Disk.ValueInt64(); v > daytonaDefaultDisk {
		sizes = append(sizes, fmt.Sprintf("disk = %d GB (default cap %d)", v, daytonaDefaultDisk))
	}
	if len(sizes) > 0 {
		resp.Diagnostics.AddWarning("Sandbox Size Above Daytona's Default Limits",
			fmt.Sprintf("Environment %q asks for %v. Daytona organizations are limited to 4 CPUs, 8 GB memory and 10 GB disk per sandbox unless their limits were raised; otherwise the snapshot build fails with a quota error.",
				plan.Name.ValueString(), sizes))
	}
}

// daytonaNetworkDiags checks allow_domains against Daytona's domainAllowList rules.
func daytonaNetworkDiags(allow []string) diag.Diagnostics {
	var diags diag.Diagnostics
	if len(allow) > maxDaytonaDomains {
		diags.AddAttributeError(path.Root("network").AtName("allow_domains"), "Too Many Allowed Domains For Daytona",
			fmt.Sprintf("network.allow_domains has %d entries; Daytona's domainAllowList takes at most %d. Use `*.` wildcards to cover several hosts of one domain, or split the work across environments.",
				len(allow), maxDaytonaDomains))
	}
	return diags
}

// daytonaReadError is the detail of a refresh that could not reach Daytona.
func daytonaReadError(env, snapshot string, err error) string {
	return fmt.Sprintf("Environment %q: the state of Daytona snapshot %s could not be read, so the plan cannot tell whether it needs a rebuild. "+
		"Check Daytona's status and the network, then plan again.\n\nOriginal Error: %s", env, snapshot, err)
}
