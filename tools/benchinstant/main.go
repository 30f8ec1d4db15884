// Command benchinstant is the trueforge provider with its plan-time work taken out: it
// serves trueforge's own schemas, configuration and apply, but answers the RPCs of a no-op
// plan (ValidateResourceConfig, ReadResource, PlanResourceChange over existing state) at
// once, echoing what Terraform sent. scripts/bench.sh plans the applied trueforge
// configuration with it as a diagnostic row: the plan time that remains is what Terraform
// itself spends on 400 resources of these schemas, the least that any provider serving this
// contract can cost. It is a measuring tool only; it never refreshes and never validates.
//
// With BENCHINSTANT_MODE=framework it serves frameworkOnly instead (framework.go): every
// RPC through the plugin framework, with trueforge's schemas and none of its resources'
// work, for the row between the two.
package main

import (
	"context"
	"log"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/provider"
)

// instant answers the no-op plan's RPCs itself and hands every other call to the real
// provider server.
type instant struct{ tfprotov6.ProviderServer }

func (instant) ValidateResourceConfig(context.Context, *tfprotov6.ValidateResourceConfigRequest) (*tfprotov6.ValidateResourceConfigResponse, error) {
	return &tfprotov6.ValidateResourceConfigResponse{}, nil
}

func (s instant) ReadResource(ctx context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	if req.CurrentState == nil {
		return s.ProviderServer.ReadResource(ctx, req)
	}
	return &tfprotov6.ReadResourceResponse{NewState: req.CurrentState, Private: req.Private}, nil
}

func (s instant) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	if req.PriorState == nil || req.ProposedNewState == nil {
		return s.ProviderServer.PlanResourceChange(ctx, req)
	}
	// Terraform's proposed new state of an unchanged resource is its prior state.
	return &tfprotov6.PlanResourceChangeResponse{PlannedState: req.ProposedNewState, PlannedPrivate: req.PriorPrivate}, nil
}

// modeEnv selects what the plugin serves: "framework" for frameworkOnly, else instant.
const modeEnv = "BENCHINSTANT_MODE"

func main() {
	// Every other call reaches the real provider, whose local builds and sandboxes
	// re-execute this binary as their setup step, build shim, unshift step and init, as
	// the provider's own main does.
	backends.ReexecMain()
	// Same process settings as the real provider (quiet SDK logs, GC target), so the only
	// difference measured is the work the three RPCs above skip.
	provider.TuneProcess()
	var server func() tfprotov6.ProviderServer
	if os.Getenv(modeEnv) == "framework" {
		server = providerserver.NewProtocol6(frameworkOnly{provider.New("bench")()})
	} else {
		serve := providerserver.NewProtocol6(provider.New("bench")())
		server = func() tfprotov6.ProviderServer { return instant{serve()} }
	}
	err := tf6server.Serve("registry.terraform.io/trueforge/trueforge", server)
	if err != nil {
		log.Fatal(err)
	}
}
