// Command terraform-provider-trueforge serves the trueforge Terraform provider.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/provider"
)

// version is set by the release build (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	// First: local snapshot builds re-execute this binary as their setup step (root in
	// a new mount namespace), build shim and unshift step, and local sandboxes as their
	// init (PID 1); such a process must run that and exit, nothing of the provider.
	backends.ReexecMain()

	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers like delve")
	flag.Parse()

	provider.TuneProcess()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/trueforge/trueforge",
		Debug:   debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
