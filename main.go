// Command terraform-provider-trueforge serves the trueforge Terraform provider.
package main

import (
	"context"
	"flag"
	"log"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/trueforge/terraform-provider-trueforge/internal/provider"
)

// version is set by the release build (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers like delve")
	flag.Parse()

	quietUnreadLogs()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/trueforge/trueforge",
		Debug:   debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}

// quietUnreadLogs turns off the plugin SDK's own trace logging when Terraform was not
// asked for logs (no TF_LOG or TF_LOG_PROVIDER). Terraform discards those lines anyway,
// but the framework formats and ships one per attribute, which made a plan over 400
// resources spend a quarter of the provider's CPU on logs nobody reads. An explicit
// TF_LOG_SDK* setting always wins.
func quietUnreadLogs() {
	if os.Getenv("TF_LOG") != "" || os.Getenv("TF_LOG_PROVIDER") != "" || os.Getenv("TF_ACC_LOG_PATH") != "" || os.Getenv("TF_LOG_PATH") != "" {
		return
	}
	for _, v := range []string{"TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_SDK_FRAMEWORK"} {
		if os.Getenv(v) == "" {
			os.Setenv(v, "OFF")
		}
	}
}
