// Command trueforge-harness runs the agents that `terraform apply` published with the
// trueforge provider: the agent loop, the model and MCP credentials and the session log
// live here; a sandbox is a tool, provisioned on the first call that needs one.
//
// It reads only the control-plane database (TRUEFORGE_DATABASE_URL, else
// ~/.local/share/trueforge/trueforge.db), never HCL. See docs/guides/running-agents.md.
//
// Build it static (CGO_ENABLED=0): it is also the netd helper that local sandboxes run
// inside their network namespace (see netd.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/egress/netd"
	"github.com/trueforge/terraform-provider-trueforge/internal/termsafe"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	// First, before the netd dispatch: the local backend re-executes this binary as a
	// sandbox's or build's setup step (root in a new mount namespace), as the sandbox
	// init (PID 1), the build shim and the unshift step, and such a process must run
	// that and exit. Their markers (an argument, an environment variable, the pid) are
	// exact and no netd invocation carries them, whereas netdArgs goes by the name the
	// binary runs under and its first argument, which must not decide what a privileged
	// step runs. netd loses nothing: its NotDumpable comes a few getenv calls later.
	backends.ReexecMain()
	if args, ok := netdArgs(os.Args); ok {
		os.Exit(netd.Main(args, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		// A bare exit status was said already (the run's own events say why it ended).
		var ec exitCode
		if !errors.As(err, &ec) {
			// An error may quote a model's, a server's or a sandbox's text.
			fmt.Fprintln(termsafe.NewWriter(os.Stderr), "Error:", err)
		}
		os.Exit(exitStatus(err))
	}
}
