//go:build linux

package local

// A sandbox with an Egress hook gets its network namespace from the keeper's outer step,
// "unshare -mn" (root) or "unshare -Urmn", not from bwrap: the sandbox user (who has no
// capabilities, and none that would count there) could not let itself bind the DNS port
// in a namespace bwrap makes for it. In the outer step the setup step (setup.go) is root
// of the namespace's owner and prepares it (netd.PrepareNamespace); bwrap then shares it
// while still unsharing everything else.
//
// The preparation brings lo up and sets net.ipv4.ip_unprivileged_port_start to 53, so the
// helper can serve DNS on 127.0.0.1:53 as the sandbox user. The namespace has no
// interface but lo, so that opens nothing to anyone outside it.
//
// BlockNetwork alone keeps bwrap's namespace (--unshare-net; bwrap brings lo up itself,
// ports below 1024 stay privileged): same isolation, and no preparation.

const netPrepEgress = "egress"

// netPrepMode is the preparation a sandbox's network namespace needs; "" means bwrap's
// network namespace (BlockNetwork) or the host's.
func netPrepMode(info record) string {
	if info.Egress != nil {
		return netPrepEgress
	}
	return ""
}
