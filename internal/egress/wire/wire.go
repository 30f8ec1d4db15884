// Package wire is what the two ends of a sandbox's egress path agree on, and nothing
// else: where the sandbox finds the harness's socket and the netd helper, the descriptor
// netd closes once it listens, the loopback ports netd (internal/egress/netd, inside the
// sandbox) listens on, which the proxy (internal/egress, on the host) points the sandbox's
// tools at, and the host-name normalisation both apply to the names that cross between
// them. The sandbox runtimes bind and start what these paths name (internal/sandbox
// re-exports them for its Egress hook).
//
// It imports only the standard library and must stay that way: netd runs inside the
// sandbox and imports nothing host-side (no TLS termination, CA, policy or secrets),
// which netd's TestNoHostSideImports checks.
package wire

import (
	"fmt"
	"net/netip"
	"strings"
)

// Fixed paths inside a sandbox for the egress plumbing.
const (
	// SocketDir is where the directory of the harness's socket is bound (read-only).
	SocketDir = "/run/trueforge/egress"
	// SocketName is the base name the socket has on the host.
	SocketName = "egress.sock"
	// SocketPath is the harness's socket as the sandbox sees it.
	SocketPath = SocketDir + "/" + SocketName
	// HelperPath is where netd's executable is bound.
	HelperPath = "/run/trueforge/netd"
	// ReadyEnv, in netd's environment, names a descriptor netd closes once it listens;
	// the runtime runs no command before that (or netd's exit), so the first command
	// finds the network up.
	ReadyEnv = "TRUEFORGE_EGRESS_READY_FD"
)

// Ports netd listens on inside the sandbox, on 127.0.0.1.
const (
	HTTPProxyPort = 3128 // HTTP proxy: CONNECT and absolute-form http:// requests
	SOCKSPort     = 1080 // SOCKS5 (CONNECT only; names sent as names, "socks5h")
	DNSPort       = 53   // synthetic DNS, UDP and TCP
)

// NormalizeHost lower-cases a host name and strips one trailing dot, refusing anything
// that is not a plain LDH name or an IP literal: no control characters, spaces, empty
// labels or non-ASCII (clients send IDNA names as punycode "xn--" labels).
func NormalizeHost(h string) (string, error) {
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil {
		return a.Unmap().String(), nil
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if h == "" || len(h) > 253 {
		return "", fmt.Errorf("host name is empty or longer than 253 characters")
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 {
			return "", fmt.Errorf("host name %q has an empty or over-long label", h)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				return "", fmt.Errorf("host name %q has the character %q; only letters, digits, '-' and '_' are allowed (punycode for international names)", h, c)
			}
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", fmt.Errorf("host name %q has a label starting or ending with '-'", h)
		}
	}
	return h, nil
}
