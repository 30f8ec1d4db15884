package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/provider"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/backend"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
)

var _ provider.ProviderWithActions = (*trueforgeProvider)(nil)

// Actions are the provider's actions (Terraform 1.14 and later: `action` blocks,
// lifecycle.action_trigger and `terraform apply -invoke`). OpenTofu and older Terraform
// have none: a configuration with an action block does not load there.
func (p *trueforgeProvider) Actions(context.Context) []func() action.Action {
	return []func() action.Action{
		NewSandboxesStopAction,
		NewAgentCheckAction,
		NewEnvironmentRebuildAction,
	}
}

// actionBase is what every action holds: the control plane Configure handed over.
type actionBase struct {
	cp *controlPlane
}

func (a *actionBase) Configure(_ context.Context, req action.ConfigureRequest, resp *action.ConfigureResponse) {
	if req.ProviderData == nil {
		return
	}
	cp, ok := req.ProviderData.(*controlPlane)
	if !ok {
		resp.Diagnostics.AddError("Unexpected Action Configure Type",
			fmt.Sprintf("Expected *controlPlane, got %T. This is a bug in the provider; please report it.", req.ProviderData))
		return
	}
	a.cp = cp
}

// configured reports whether the provider was configured, adding an error when not.
func (a *actionBase) configured(resp *action.InvokeResponse) bool {
	if a.cp == nil {
		resp.Diagnostics.AddError("Provider Not Configured",
			"The trueforge provider was not configured with known values, so the action cannot reach the control plane. "+
				"Make database_url and owner known at plan time.")
		return false
	}
	return true
}

// sandboxes is a lifecycle manager over the control plane's sandbox providers, as the
// harness runs one: what stops sandboxes and gives a check its sandbox. Local sandboxes
// it creates have no network (it runs no egress proxy), as a harness without one.
func (cp *controlPlane) sandboxes() *lifecycle.Manager {
	return lifecycle.New(lifecycle.Config{Store: cp.store, Runtimes: &backend.Runtimes{Plane: cp.plane, Backends: cp.backends}})
}

// progress sends a progress message when Terraform listens for them.
func progress(resp *action.InvokeResponse, format string, a ...any) {
	if resp.SendProgress != nil {
		resp.SendProgress(action.InvokeProgressEvent{Message: fmt.Sprintf(format, a...)})
	}
}
