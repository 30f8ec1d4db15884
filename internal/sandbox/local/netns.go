//go:build linux

package local

import (
	"fmt"
	"os"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress/netd"
)

// A sandbox without the host's network (BlockNetwork, or an Egress hook) gets its network
// namespace from the keeper's outer step, "unshare -Urmn", not from bwrap: bwrap started
// as root of that user namespace creates the namespaces it unshares before the sandbox's
// own user namespace, so the sandbox user (who has no capabilities, and none that would
// count there) could neither bring lo up nor let itself bind the DNS port. In the outer
// step the keeper script is root of the namespace's owner and prepares it by running
// this very program in "netprep" mode, then bwrap shares it (--share-net) while still
// unsharing everything else.
//
// netprep brings lo up (both kinds) and, for an Egress hook, sets
// net.ipv4.ip_unprivileged_port_start to 53 so the helper can serve DNS on
// 127.0.0.1:53 as the sandbox user. The namespace has no interface but lo, so that opens
// nothing to anyone outside it; its owner is the keeper's user namespace, as it was when
// bwrap created it.

const (
	// netPrepEnv selects the mode: netPrepLoopback or netPrepEgress.
	netPrepEnv = "TRUEFORGE_SANDBOX_NETPREP"
	// netPrepArg is the only argument of a netprep run, so that the environment
	// variable alone never turns a normal run of the program into one.
	netPrepArg = "trueforge-sandbox-netprep"

	netPrepLoopback = "loopback"
	netPrepEgress   = "egress"
)

// isNetPrep reports whether this process was started by a keeper script to prepare a
// network namespace.
func isNetPrep() bool {
	return len(os.Args) == 2 && os.Args[1] == netPrepArg && os.Getenv(netPrepEnv) != ""
}

// runNetPrep prepares the current network namespace; the keeper script runs it as root
// of the namespace's owner, and a failure stops the sandbox from starting.
func runNetPrep(mode string) int {
	var err error
	switch mode {
	case netPrepLoopback:
		err = netd.LoopbackUp()
	case netPrepEgress:
		err = netd.PrepareNamespace()
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "trueforge netprep:", err)
		return 1
	}
	return 0
}

// netPrepMode is the netprep mode a sandbox needs; "" means it shares the host's network.
func netPrepMode(info record) string {
	switch {
	case info.Egress != nil:
		return netPrepEgress
	case info.BlockNetwork:
		return netPrepLoopback
	}
	return ""
}
