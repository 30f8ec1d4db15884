// Command terraform-provider-trueforge serves the trueforge Terraform provider.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/trueforge/terraform-provider-trueforge/internal/provider"
)

// version is set by the release build (-ldflags "-X main.version=...").
var version = "dev"

func main() {
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
