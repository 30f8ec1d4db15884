package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// Resolver resolves names for the proxy; *net.Resolver satisfies it. Only names that
// passed the policy are ever resolved, so a sandbox cannot make the harness look up
// arbitrary names (DNS exfiltration).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// resolve turns a checked host into addresses, refusing the whole name when any address
// is forbidden: a name that resolves to both a public and a private address is how DNS
// rebinding is attempted.
func (p *Proxy) resolve(ctx context.Context, host string) ([]netip.Addr, *Denial) {
	if a, err := netip.ParseAddr(host); err == nil {
		if r, bad := addrForbidden(a, p.cfg.AllowAddrs); bad {
			return nil, deny(ReasonForbiddenAddress, host, "%s is in %s, which no sandbox may reach", host, r)
		}
		return []netip.Addr{a.Unmap()}, nil
	}
	addrs, err := p.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return nil, deny(ReasonResolveFailed, host, "%s could not be resolved: %v", host, err)
	}
	for i, a := range addrs {
		a = a.Unmap()
		addrs[i] = a
		if r, bad := addrForbidden(a, p.cfg.AllowAddrs); bad {
			return nil, deny(ReasonForbiddenAddress, host, "%s resolves to %s in %s (private, loopback, link-local, metadata or reserved), which no sandbox may reach", host, a, r)
		}
	}
	return p.admitAddrs(host, addrs) // cidr.go
}

// dial connects to the first reachable address, so the connection is pinned to an
// address that was checked.
func (p *Proxy) dial(ctx context.Context, addrs []netip.Addr, port string) (net.Conn, error) {
	d := net.Dialer{Timeout: p.cfg.DialTimeout}
	var errs []error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("dial: %w", errors.Join(errs...))
}

// dialChecked is the upstream dialer of terminated and plain requests: every new
// upstream connection is checked again.
func (p *Proxy) dialChecked(ctx context.Context, _, hostport string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, err
	}
	if d := p.checkHost(host); d != nil {
		return nil, d
	}
	addrs, d := p.resolve(ctx, host)
	if d != nil {
		return nil, d
	}
	return p.dial(ctx, addrs, port)
}

// newClientTLS verifies upstream servers normally: the given roots (nil: the host's),
// the name from the CONNECT target.
func newClientTLS(roots *x509.CertPool) *tls.Config {
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
}
