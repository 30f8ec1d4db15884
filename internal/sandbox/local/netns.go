//go:build linux

package local

import (
	"fmt"
	"os"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress/netd"
)

// A sandbox with an Egress hook gets its network namespace from the keeper's outer step,
// "unshare -Urmn", not from bwrap: bwrap started as root of that user namespace creates
// the namespaces it unshares before the sandbox's own user namespace, so the sandbox user
// (who has no capabilities, and none that would count there) could not let itself bind
// the DNS port. In the outer step the keeper script is root of the namespace's owner and
// prepares it by running this very program in "netprep" mode; bwrap then shares it
// (--share-net) while still unsharing everything else.
//
// netprep brings lo up and sets net.ipv4.ip_unprivileged_port_start to 53, so the helper
// can serve DNS on 127.0.0.1:53 as the sandbox user. The namespace has no interface but
// lo, so that opens nothing to anyone outside it; its owner is the keeper's user
// namespace, as it is when bwrap creates one.
//
// BlockNetwork alone keeps bwrap's namespace (--unshare-net; bwrap brings lo up itself,
// ports below 1024 stay privileged): same owner, same isolation, and no extra program
// start (netprep costs one start of this program, measured by BenchmarkColdStartEgress).

const (
	// netPrepEnv selects the mode; netPrepEgress is the only one.
	netPrepEnv = "TRUEFORGE_SANDBOX_NETPREP"
	// netPrepArg is the only argument of a netprep run, so that the environment
	// variable alone never turns a normal run of the program into one.
	netPrepArg = "trueforge-sandbox-netprep"

	netPrepEgress = "egress"
)

// isNetPrep reports whether this process was started by a keeper script to prepare a
// network namespace.
func isNetPrep() bool {
	return len(os.Args) == 2 && os.Args[1] == netPrepArg && os.Getenv(netPrepEnv) != ""
}

// runNetPrep prepares the current network namespace; the keeper script runs it as root
// of the namespace's owner, and a failure stops the sandbox from starting.
func runNetPrep(mode string) int {
	err := fmt.Errorf("unknown mode %q", mode)
	if mode == netPrepEgress {
		err = netd.PrepareNamespace() // lo up, ip_unprivileged_port_start=53
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "trueforge netprep:", err)
		return 1
	}
	return 0
}

// netPrepMode is the netprep mode a sandbox needs; "" means bwrap's network namespace
// (BlockNetwork) or the host's.
func netPrepMode(info record) string {
	if info.Egress != nil {
		return netPrepEgress
	}
	return ""
}
