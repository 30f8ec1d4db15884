// Command trueforge-netd is the in-sandbox network helper: started by the sandbox runtime
// inside the sandbox's network namespace (only lo), it serves an HTTP proxy, a SOCKS5
// proxy and a synthetic DNS on loopback and carries every connection to the harness's
// egress proxy through the unix socket at /run/trueforge/egress/egress.sock (its directory
// is bound in, so a harness listening anew there is reached at once). See package
// internal/egress/netd. Once listening it closes the descriptor the runtime names in
// TRUEFORGE_EGRESS_READY_FD (sandbox.EgressReadyEnv), if any: the runtime runs the
// sandbox's commands only after that. It makes itself not dumpable as it starts, and
// the runtime starts it under the sandbox's seccomp filter minus the AF_UNIX rule. Build
// it static: CGO_ENABLED=0 go build ./cmd/trueforge-netd.
//
// A static trueforge-harness serves as the same helper (the default); both run netd.Main.
package main

import (
	"os"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress/netd"
)

func main() {
	os.Exit(netd.Main(os.Args[1:], os.Stderr))
}
