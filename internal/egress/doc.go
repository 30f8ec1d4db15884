// Package egress is the harness side of a sandbox's network on the local backend: a
// per-sandbox proxy that is the sandbox's only way out, enforcing the environment's
// network policy and forwarding network-scoped secrets only to their hosts.
//
// # Shape
//
// The sandbox has no interface but lo. Each sandbox has one unix socket (served here by
// Proxy.Serve, created by Listen, mode 0600) named egress.sock alone in a directory of
// its own; the runtime binds that directory read-only at /run/trueforge/egress (so the
// socket is /run/trueforge/egress/egress.sock, sandbox.EgressSocketPath) and runs
// trueforge-netd (package netd) inside the sandbox's network namespace. netd listens on
// 127.0.0.1:3128 (HTTP proxy), 127.0.0.1:1080 (SOCKS5) and 127.0.0.1:53 (DNS, UDP and
// TCP) and sends every connection to the socket as an HTTP proxy request naming the
// target host (never an address it resolved); tunnel data is then relayed by netd and
// the proxy, both with splice(2). netd dials the socket afresh for every connection, and
// the directory, not the socket file, is what the sandbox has bound: a harness that
// listens anew at the same path (a new process, from the proxy's saved State) is reached
// by running sandboxes at once, with no restart. The harness wires a sandbox up with:
//
//	p, err := egress.New(ctx, egress.Config{SandboxID: id, Policy: pol, Secrets: src, Log: sink})
//	ln, err := egress.Listen(socketPath) // <private dir>/egress.sock
//	go p.Serve(ln)
//	egress := &sandbox.Egress{Socket: socketPath, Helper: netdPath, Files: p.Files()}
//	req := sandbox.CreateRequest{Env: p.Env(), Egress: egress, ...}
//
// Env sets HTTP_PROXY, HTTPS_PROXY, ALL_PROXY (socks5h), NO_PROXY (localhost,127.0.0.1,::1)
// in both cases, NODE_USE_ENV_PROXY=1, the CA variables (SSL_CERT_FILE,
// REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS, CURL_CA_BUNDLE, PIP_CERT, GIT_SSL_CAINFO,
// CARGO_HTTP_CAINFO, DENO_CERT, AWS_CA_BUNDLE) pointing at /run/trueforge/ca-bundle.pem,
// and one placeholder per secret. Files holds ca-bundle.pem (the sandbox CA, then the
// host's roots) and resolv.conf ("nameserver 127.0.0.1"), which the runtime must make
// visible at /etc/resolv.conf.
//
// netd binds port 53 as the sandbox user only if the network namespace lets it: bubblewrap
// started as root creates the namespace outside the sandbox's user namespace, where a
// capability given to the sandbox user does not count. The namespace must be created
// first and prepared by root of its owner (lo up, net.ipv4.ip_unprivileged_port_start=53;
// the namespace has only lo), then bubblewrap runs with --share-net in it. The local
// runtime (internal/sandbox/local) does exactly that for every sandbox with an Egress
// hook: its keeper runs "unshare -Urmn", prepares the namespace with
// netd.PrepareNamespace (what "trueforge-netd -prepare" runs), binds FileResolvConf over
// ResolvConfPath, starts netd as the sandbox user under the sandbox's seccomp filter
// minus its AF_UNIX rule (netd makes itself not dumpable) and waits until netd closes the descriptor named by sandbox.EgressReadyEnv, so the harness only
// has to pass Env and Egress as above (TestEgressEndToEnd there runs the whole path, as
// root and unprivileged). A hand-made launch (TestBubblewrapSandboxWithEgress) looks like:
//
//	unshare -Urn sh -c 'netd -prepare && exec bwrap --unshare-all --share-net --uid 1000 ... \
//	    --ro-bind SOCKETDIR /run/trueforge/egress --ro-bind NETD /run/trueforge/netd \
//	    --ro-bind resolv.conf /etc/resolv.conf ... sh -c "/run/trueforge/netd & exec CMD"'
//
// Without port 53, netd runs without DNS: nothing leaks, only proxy-unaware lookups fail.
//
// # Policy (read when the sandbox is created)
//
// Order: block_all refuses everything; an IP literal is refused under an allow list; a
// name must match allow_domains (exact, or "*.suffix" for subdomains only; "*" and
// "*.tld" are refused, as the provider does at plan time); only then is the name resolved,
// by the proxy, and refused if any address is loopback, private, link-local (metadata
// 169.254.169.254), CGNAT, ULA (fd00:ec2::254), multicast, reserved, documentation,
// NAT64/6to4/Teredo or 198.18.0.0/15. That check applies with no allow list too
// (unrestricted egress never reaches the harness host or a metadata service). The
// connection is dialled to the checked address. Config.AllowAddrs exempts single
// addresses (tests, an explicitly trusted service); nothing turns the check off.
//
// An opaque tunnel (a sandbox without secrets, or a Passthrough host) must send a TLS
// ClientHello whose server name is the CONNECT host (a hello without one is refused under
// an allow list) or, for plain HTTP inside the tunnel, a first request whose Host is the
// CONNECT host. Refusals before the tunnel are HTTP 403 (502 when the upstream cannot
// be reached or resolved) with X-Trueforge-Deny: <reason> and a JSON body {"error":
// "egress_denied", "reason", "host", "message"}; an SNI refusal is a TLS
// unrecognized_name alert. Every decision, allowed or not, goes to Config.Log, without
// secret values.
//
// # Secrets
//
// The names Config.Secrets returns when New runs get a placeholder each ("tfph_" + 32
// hex digits, random per sandbox); later additions never reach the sandbox. In a sandbox
// with secrets every TLS CONNECT is terminated with a per-sandbox CA (ECDSA P-256,
// 10-year CA, 7-day leaves re-issued after 6 days, at most 1024 cached) unless the host
// is in Config.Passthrough (or, with TerminateOnlySecretHosts, no secret names it), so a
// placeholder is seen wherever it goes. Upstream TLS is verified normally
// (Config.RootCAs); the host is the CONNECT target and a request whose Host header names
// another host is refused. Placeholders are replaced in header values only: the whole
// value, inside it ("Bearer <p>"), and inside Basic credentials after base64 decoding.
// Protocol upgrades (WebSocket) pass through after their headers are substituted.
// A placeholder bound for a host its secret does not name, over plain http://, or of a
// removed secret, is refused (Config.PassInertPlaceholders lets the first kind through
// unchanged); one in the request target is refused the same way but never substituted.
// The secret source is read on every request that may carry a placeholder, so rotation
// applies to the next request and removal at once.
//
// # Limits and defaults
//
// At most 512 open tunnels per sandbox (Config.MaxTunnels; then 429 too_many_tunnels), and
// at most 1024 connections to the proxy of any kind (Config.MaxConns; then 429
// too_many_connections), so a sandbox cannot exhaust the harness's file descriptors.
// Upstream dial timeout 10 s (Config.DialTimeout); TLS handshakes and the first flight
// of a tunnel 30 s; request headers 60 s; idle keep-alive 2 minutes; ClientHello at most
// 64 KB; 4 MB socket buffers on a tunnel's unix side. Terminated connections offer
// HTTP/1.1 only to the sandbox (upstream may use HTTP/2). Not done: request bodies,
// query strings and paths are never substituted; responses are not scrubbed of
// values an upstream echoes back; AWS SigV4 and other signed requests are not re-signed;
// only the first request inside an opaque plain-HTTP tunnel is checked; in a sandbox with
// secrets a tunnel must carry TLS or HTTP; proxy-unaware
// programs that connect to a synthetic address directly get no connection (transparent
// capture is not implemented).
package egress
