package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress/wire"
)

// Files the proxy asks the runtime to write under /run/trueforge (the Files of the
// runtime's egress hook, sandbox.Egress).
const (
	FileCABundle   = "ca-bundle.pem" // the host's roots plus this sandbox's CA
	FileResolvConf = "resolv.conf"   // must be bound at ResolvConfPath
	// ResolvConfPath is where the runtime must make FileResolvConf visible, so every
	// resolver in the sandbox asks netd and nothing else.
	ResolvConfPath = "/etc/resolv.conf"
	runDir         = "/run/trueforge"
)

// Defaults for Config fields left zero.
const (
	DefaultDialTimeout = 10 * time.Second
	DefaultMaxTunnels  = 512
	handshakeTimeout   = 30 * time.Second
	headerTimeout      = 60 * time.Second
	idleTimeout        = 2 * time.Minute
)

// systemBundles are tried in order for the host's roots when Config.SystemRoots is nil.
var systemBundles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem"}

// Config describes one sandbox's proxy.
type Config struct {
	// SandboxID names the sandbox in the CA and the decision log.
	SandboxID string
	Policy    Policy
	// Secrets returns the environment's current secrets; nil means none. Ignored under
	// Policy.BlockAll. The names it returns when New runs are the ones this sandbox gets
	// placeholders for; secrets added later never reach it.
	Secrets SecretSource
	// Log receives every decision; nil drops them.
	Log DecisionSink
	// Resolver resolves allowed names; nil means net.DefaultResolver.
	Resolver Resolver
	// RootCAs verifies upstream servers of terminated connections; nil means the host's
	// roots.
	RootCAs *x509.CertPool
	// SystemRoots (PEM) is added to the sandbox's CA bundle after its own CA; nil reads
	// the host's bundle (the first of the usual Debian, Red Hat, SUSE, Alpine paths).
	SystemRoots []byte
	// PassInertPlaceholders lets a placeholder bound for another host go out unchanged
	// instead of refusing the request (useful when the sandbox quotes its own environment
	// to, say, a model API).
	PassInertPlaceholders bool
	// Passthrough hosts (exact or "*.suffix") are never terminated, for clients that pin
	// certificates or use client certificates; secrets are not substituted there.
	Passthrough []string
	// TerminateOnlySecretHosts terminates TLS only for hosts some secret is bound to.
	// By default a sandbox with secrets has every TLS connection terminated (except
	// Passthrough), so a placeholder sent to any host is caught.
	TerminateOnlySecretHosts bool
	// AllowAddrs exempts these exact addresses from the forbidden-range check. For tests
	// with upstream servers on loopback, and for an operator's explicitly trusted
	// service; there is no switch that turns the check off.
	AllowAddrs []netip.Addr
	// MaxTunnels bounds the tunnels a sandbox may hold open at once; 0 means
	// DefaultMaxTunnels. Past it a CONNECT gets 429 (too_many_tunnels), so one sandbox
	// cannot exhaust the harness's file descriptors.
	MaxTunnels int
	// MaxConns bounds the connections a sandbox may hold open to the proxy at once,
	// whatever they carry; 0 means DefaultMaxConns. Past it a new connection gets 429
	// (too_many_connections) and is closed.
	MaxConns int
	// DialTimeout bounds each upstream dial; 0 means DefaultDialTimeout.
	DialTimeout time.Duration
	// State restores a proxy created before (same CA, same placeholders), for a harness
	// that restarts while its sandboxes live on.
	State *State
}

// State is what a proxy must keep across harness restarts for its sandbox to keep
// working: the CA its bundle trusts and the placeholders in its environment. It holds a
// private key: store it encrypted.
type State struct {
	CACertPEM    []byte            `json:"ca_cert_pem"`
	CAKeyPEM     []byte            `json:"ca_key_pem"`
	Placeholders map[string]string `json:"placeholders"`
}

// Proxy is the harness side of one sandbox's network: it serves the sandbox's unix
// socket, enforces the policy and substitutes secrets.
type Proxy struct {
	cfg          Config
	policy       policy
	passthrough  []Pattern
	placeholders map[string]string // secret name -> placeholder, fixed at creation
	ca           *sandboxCA
	resolver     Resolver
	transport    *http.Transport
	roots        []byte

	mu     sync.Mutex
	srv    *http.Server
	conns  map[net.Conn]struct{} // hijacked connections, closed by Close
	closed bool
}

// New builds a sandbox's proxy. It reads the secrets once to fix their names.
func New(ctx context.Context, cfg Config) (*Proxy, error) {
	pol, err := parsePolicy(cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("egress policy: %w", err)
	}
	pass, err := ParsePatterns("passthrough", cfg.Passthrough)
	if err != nil {
		return nil, fmt.Errorf("egress config: %w", err)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.MaxTunnels <= 0 {
		cfg.MaxTunnels = DefaultMaxTunnels
	}
	if pol.blockAll {
		cfg.Secrets = nil // block_all makes secrets inert
	}
	p := &Proxy{cfg: cfg, policy: pol, passthrough: pass, placeholders: map[string]string{}, resolver: cfg.Resolver, conns: map[net.Conn]struct{}{}}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	if st := cfg.State; st != nil {
		if p.ca, err = loadCA(st.CACertPEM, st.CAKeyPEM); err != nil {
			return nil, err
		}
		if cfg.Secrets != nil {
			maps.Copy(p.placeholders, st.Placeholders)
		}
	} else {
		if p.ca, err = newCA(cfg.SandboxID); err != nil {
			return nil, err
		}
		if cfg.Secrets != nil {
			list, err := cfg.Secrets(ctx)
			if err != nil {
				return nil, fmt.Errorf("egress secrets: %w", err)
			}
			for _, s := range list {
				if !envNameRe.MatchString(s.Name) {
					return nil, fmt.Errorf("egress secrets: name %q is not an environment variable name; use letters, digits and '_'", s.Name)
				}
				if p.placeholders[s.Name], err = newPlaceholder(); err != nil {
					return nil, err
				}
			}
		}
	}
	p.roots = cfg.SystemRoots
	if p.roots == nil {
		for _, f := range systemBundles {
			if b, err := os.ReadFile(f); err == nil {
				p.roots = b
				break
			}
		}
	}
	p.transport = &http.Transport{
		DialContext:         p.dialChecked,
		TLSClientConfig:     newClientTLS(cfg.RootCAs),
		TLSHandshakeTimeout: handshakeTimeout,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	return p, nil
}

// Env is what the sandbox's environment needs: the proxy variables most tools read (in
// both cases), the CA variables pointing at the bundle, and one placeholder per secret.
func (p *Proxy) Env() map[string]string {
	httpProxy := fmt.Sprintf("http://127.0.0.1:%d", wire.HTTPProxyPort)
	socks := fmt.Sprintf("socks5h://127.0.0.1:%d", wire.SOCKSPort)
	bundle := runDir + "/" + FileCABundle
	env := map[string]string{
		"NODE_USE_ENV_PROXY": "1", // Node 24+: built-in http and fetch honour the variables
	}
	for k, v := range map[string]string{"HTTP_PROXY": httpProxy, "HTTPS_PROXY": httpProxy, "ALL_PROXY": socks, "NO_PROXY": "localhost,127.0.0.1,::1"} {
		env[k] = v
		env[toLower(k)] = v
	}
	for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO", "CARGO_HTTP_CAINFO", "DENO_CERT", "AWS_CA_BUNDLE"} {
		env[k] = bundle
	}
	maps.Copy(env, p.placeholders)
	return env
}

func toLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Files are written into the sandbox under /run/trueforge: the CA bundle (this sandbox's
// CA first, then the host's roots) and resolv.conf (to be bound at ResolvConfPath).
func (p *Proxy) Files() map[string][]byte {
	bundle := append([]byte("# trueforge sandbox egress CA\n"), p.ca.certPEM...)
	if len(p.roots) > 0 {
		bundle = append(bundle, '\n')
		bundle = append(bundle, p.roots...)
	}
	return map[string][]byte{
		FileCABundle:   bundle,
		FileResolvConf: []byte("# trueforge: names are answered by netd with synthetic addresses; the proxy resolves them\nnameserver 127.0.0.1\noptions attempts:1 timeout:2\n"),
	}
}

// State returns what New needs to recreate this proxy after a restart.
func (p *Proxy) State() State {
	return State{CACertPEM: p.ca.certPEM, CAKeyPEM: p.ca.keyPEM, Placeholders: maps.Clone(p.placeholders)}
}

// Listen creates the sandbox's unix socket at path, mode 0600 (the sandbox's processes
// map to the harness's user), replacing a stale socket file.
func Listen(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("egress socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("egress socket: %w", err)
	}
	return ln, nil
}

// Serve answers the sandbox's connections on ln until Close; it returns nil after Close
// (also when Close came first).
func (p *Proxy) Serve(ln net.Listener) error {
	srv := &http.Server{
		Handler:                      p,
		ReadHeaderTimeout:            headerTimeout,
		IdleTimeout:                  idleTimeout,
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     log.New(io.Discard, "", 0),
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ln.Close()
	}
	p.srv = srv
	p.mu.Unlock()
	err := srv.Serve(newConnLimit(ln, p.cfg.MaxConns))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops serving and cuts every open connection, tunnels included.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	srv := p.srv
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	var err error
	if srv != nil {
		err = srv.Close()
	}
	for c := range conns {
		c.Close()
	}
	p.transport.CloseIdleConnections()
	return err
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// full reports whether the sandbox holds MaxTunnels tunnels already.
func (p *Proxy) full() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns) >= p.cfg.MaxTunnels
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) log(d Decision) {
	if p.cfg.Log == nil {
		return
	}
	d.Sandbox = p.cfg.SandboxID
	if d.Time.IsZero() {
		d.Time = time.Now()
	}
	p.cfg.Log(d)
}

func (p *Proxy) logDeny(mode, host, port string, r *http.Request, d *Denial) {
	dec := Decision{Mode: mode, Host: host, Port: port, Reason: d.Reason, Message: d.Message}
	if r != nil && r.Method != http.MethodConnect {
		dec.Method, dec.Path = r.Method, r.URL.Path
	}
	p.log(dec)
}

// ServeHTTP dispatches the sandbox's requests: CONNECT opens a tunnel, anything else must
// be an absolute http:// URL.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	p.plain(w, r)
}
