// Package sandboxnet runs the egress proxies of a harness's local sandboxes: one
// internal/egress proxy per sandbox that is not block_all, serving a unix socket that the
// local runtime binds into the sandbox as its only way out (with the netd helper inside).
//
// # Lifetime
//
// A proxy lives as long as its sandbox is Running in this harness process. Attach starts
// it for a new sandbox; Detach closes it when the sandbox is stopped, archived or deleted
// (and, on delete, forgets its state). Ensure recreates it for an existing sandbox
// (resumed after a stop or archive, or found Running after the harness restarted, which
// is every `trueforge-harness run` of an existing session) from the state persisted at
// Attach: the network policy read when the sandbox was created, and the proxy's CA and
// placeholders sealed with the control plane's secret box (table sandbox_egress, AAD
// "sandbox_egress/<sandbox id>"), so the placeholders in the sandbox's environment and the
// CA it trusts stay valid. A recreated proxy listens at the same path, in the sandbox's
// own socket directory, which the runtime binds into the sandbox (not the socket file):
// a Running sandbox reaches it with no restart, its processes untouched. That directory
// therefore keeps its inode for the sandbox's whole life; it is removed only when the
// sandbox is deleted (Detach with forget), never when a proxy closes.
//
// # Policy and secrets
//
// Network policy (block_all, allow_domains) is read once, when the sandbox is created; a
// running session keeps it until its sandbox is replaced. Secrets are the exception: the
// source reads the environment's secrets from the store and opens them with the secret
// box (AAD "secret/<environment>/<VAR>") on every request that may carry a placeholder,
// so a rotation applies to the next request and a removal at once. Only the variables the
// environment had when the sandbox was created get placeholders; a secret added later
// never reaches the sandbox (package egress fixes the names at creation).
//
// # Decisions
//
// Every decision of a proxy (allowed or refused, never a secret's value) is recorded in
// the session's event log as an "egress" event, written synchronously on the
// connection's goroutine, so it is in the log before the tool call that caused it ends.
//
// # Defaults
//
// Each sandbox's socket is <Config.Dir>/<16 hex digits of sha256(sandbox id)>/egress.sock
// (sandbox.EgressSocketName): a directory per sandbox holding that socket alone, which is
// what the local runtime binds, read-only, into that sandbox only. Config.Dir and every
// sandbox directory are 0700 and refused unless they are directories (not links) owned
// by this user; the socket is 0600. The sandbox's user (uid 1000 in its user namespace)
// maps to this user, root or not, so it owns both and may connect. Unix socket paths
// are limited to 107 bytes: when Dir is too deep for that, the sandbox directories go
// under <temp dir>/tf-egress-<16 hex digits of sha256(Dir)> instead (same checks), the
// same for every harness process on that database. The netd helper is Config.Helper,
// which must be a static executable (see Static).
package sandboxnet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Config configures Proxies.
type Config struct {
	Store *store.Store
	// Plane is the control plane of Store, whose secret key seals the proxies' state and
	// opens secrets; nil is controlplane.New(Store).
	Plane *controlplane.Plane
	// Dir holds the sandboxes' socket directories; created 0700.
	Dir string
	// Helper is the static netd executable bound into each sandbox. Empty refuses to
	// attach (a local sandbox is never given the host's network instead).
	Helper string
	// HelperErr, when Helper is empty, says why (shown to the user).
	HelperErr error
	// Record receives each decision as an egress event (events.Egress); nil drops them.
	Record events.Recorder
	Logger *slog.Logger

	// Upstream knobs handed to every proxy (egress.Config): for tests with loopback
	// upstreams, and for an operator's explicitly trusted service. Nil/empty means the
	// egress defaults (system resolver, host roots, no address exempt).
	Resolver    egress.Resolver
	AllowAddrs  []netip.Addr
	RootCAs     *x509.CertPool
	SystemRoots []byte
}

// Proxies are the running egress proxies of this process, by sandbox id.
type Proxies struct {
	cfg Config

	mu   sync.Mutex
	live map[string]*running
}

type running struct {
	proxy *egress.Proxy
	sock  string
	file  os.FileInfo // the socket file as created, to notice another process replacing it
	done  chan struct{}
}

// ours reports whether the socket file is still the one r listens on.
func (r *running) ours() bool {
	fi, err := os.Stat(r.sock)
	return err == nil && os.SameFile(fi, r.file)
}

// New returns Proxies.
func New(cfg Config) *Proxies {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Plane == nil {
		cfg.Plane = controlplane.New(cfg.Store)
	}
	return &Proxies{cfg: cfg, live: map[string]*running{}}
}

// secretBox is the plane's secret box (loaded and checked once, by the plane).
func (x *Proxies) secretBox(ctx context.Context) (*secretbox.Box, error) {
	return x.cfg.Plane.SecretBox(ctx)
}

// maxSocketPath is the longest unix socket path Linux takes (sun_path less its NUL).
const maxSocketPath = 107

// socketDir is Config.Dir, or, when a socket under it would be too long a path (a deep
// database directory), <temp dir>/tf-egress-<16 hex digits of sha256(Dir)>, the same for
// every harness process on that database.
func (x *Proxies) socketDir() string {
	if len(x.cfg.Dir)+len("/0123456789abcdef/"+sandbox.EgressSocketName) <= maxSocketPath {
		return x.cfg.Dir
	}
	sum := sha256.Sum256([]byte(x.cfg.Dir))
	return filepath.Join(os.TempDir(), "tf-egress-"+hex.EncodeToString(sum[:8]))
}

// sandboxDir is the directory of sandboxID's socket, which the runtime binds into it.
func (x *Proxies) sandboxDir(sandboxID string) string {
	sum := sha256.Sum256([]byte(sandboxID))
	return filepath.Join(x.socketDir(), hex.EncodeToString(sum[:8]))
}

// SocketPath is where the proxy of sandboxID listens: sandbox.EgressSocketName alone in
// a directory of the sandbox's own.
func (x *Proxies) SocketPath(sandboxID string) string {
	return filepath.Join(x.sandboxDir(sandboxID), sandbox.EgressSocketName)
}

// makeSocketDir creates the socket directory and sandboxID's directory in it, 0700, and
// checks that each is a directory of this user's, not a link or another user's (the
// fallback lives in a shared temp dir). An existing sandbox directory is kept as it is
// (a running sandbox has it bound), only its mode is set.
func (x *Proxies) makeSocketDir(sandboxID string) error {
	if err := os.MkdirAll(x.socketDir(), 0o700); err != nil {
		return err
	}
	for _, dir := range []string{x.socketDir(), x.sandboxDir(sandboxID)} {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		fi, err := os.Lstat(dir)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() {
			return fmt.Errorf("egress socket directory %s is not a directory owned by this user; remove it", dir)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// Attach starts the proxy of a new sandbox of environment env and records its state.
// It returns the variables the sandbox's environment needs (proxy and CA variables, one
// placeholder per secret; the environment's own variables are the caller's) and the
// runtime's egress hook.
func (x *Proxies) Attach(ctx context.Context, sessionID, sandboxID string, env store.Environment) (map[string]string, *sandbox.Egress, error) {
	box, rec, err := x.newRecord(ctx, sessionID, sandboxID, env)
	if err != nil {
		return nil, nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.live[sandboxID]; ok {
		x.closeLocked(sandboxID, old)
	}
	r, err := x.start(ctx, rec, nil)
	if err != nil {
		return nil, nil, err
	}
	if rec.StateEnc, err = sealState(box, sandboxID, r.proxy.State()); err != nil {
		x.closeLocked(sandboxID, r)
		return nil, nil, err
	}
	if err := x.cfg.Store.PutSandboxEgress(ctx, rec); err != nil {
		x.closeLocked(sandboxID, r)
		return nil, nil, err
	}
	x.live[sandboxID] = r
	return r.proxy.Env(), &sandbox.Egress{Socket: r.sock, Helper: x.cfg.Helper, Files: r.proxy.Files()}, nil
}

// Prepare readies the egress of a warm pool member of environment env, made before any
// session: its proxy's state (CA, one placeholder per secret the environment has now)
// and its socket directory, which the runtime binds into it. Nothing is served and
// nothing recorded in sandbox_egress: no code runs in a member, and no session owns it
// yet. It returns what Attach does, and the sealed state the caller keeps with the
// member (store.PoolSandbox.Egress) and hands to Adopt when a session claims it.
func (x *Proxies) Prepare(ctx context.Context, sandboxID string, env store.Environment) (map[string]string, *sandbox.Egress, string, error) {
	box, rec, err := x.newRecord(ctx, "", sandboxID, env)
	if err != nil {
		return nil, nil, "", err
	}
	// The placeholders are made from the secrets' names; their values are read only when
	// a claiming session's proxy substitutes them, with that session's consent.
	names := func(ctx context.Context) ([]egress.Secret, error) {
		list, err := x.cfg.Store.ListSecrets(ctx, env.Name)
		out := make([]egress.Secret, 0, len(list))
		for _, s := range list {
			out = append(out, egress.Secret{Name: s.EnvName, Hosts: s.Hosts})
		}
		return out, err
	}
	p, err := egress.New(ctx, egress.Config{SandboxID: sandboxID, Policy: policyOf(rec), Secrets: names, SystemRoots: x.cfg.SystemRoots})
	if err != nil {
		return nil, nil, "", fmt.Errorf("egress proxy of sandbox %s: %w", sandboxID, err)
	}
	defer p.Close()
	if rec.StateEnc, err = sealState(box, sandboxID, p.State()); err != nil {
		return nil, nil, "", err
	}
	x.mu.Lock()
	err = x.makeSocketDir(sandboxID)
	x.mu.Unlock()
	if err != nil {
		return nil, nil, "", err
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, nil, "", err
	}
	return p.Env(), &sandbox.Egress{Socket: x.SocketPath(sandboxID), Helper: x.cfg.Helper, Files: p.Files()}, string(raw), nil
}

// Adopt makes the prepared egress of a claimed warm pool member (Prepare) the egress of
// session sessionID's sandbox: recorded for the session, as Attach records it, and its
// proxy served here, deciding and substituting for that session from its first request
// (secrets lent with its agent's owner's consent, decisions in its log).
func (x *Proxies) Adopt(ctx context.Context, sessionID, sandboxID, prepared string) error {
	var rec store.SandboxEgress
	if err := json.Unmarshal([]byte(prepared), &rec); err != nil || rec.SandboxID != sandboxID {
		return fmt.Errorf("the prepared egress of warm pool sandbox %s is damaged (%v); it is not handed out", sandboxID, err)
	}
	rec.SessionID, rec.CreatedAt = sessionID, time.Now()
	if err := x.cfg.Store.PutSandboxEgress(ctx, rec); err != nil {
		return err
	}
	_, err := x.Ensure(ctx, sessionID, sandboxID)
	return err
}

// newRecord is the egress record of a new sandbox of env for sessionID (no state yet),
// with the secret box that seals its state; refused without a netd helper.
func (x *Proxies) newRecord(ctx context.Context, sessionID, sandboxID string, env store.Environment) (*secretbox.Box, store.SandboxEgress, error) {
	if x.cfg.Helper == "" {
		why := x.cfg.HelperErr
		if why == nil {
			why = errors.New("no netd helper is configured")
		}
		return nil, store.SandboxEgress{}, fmt.Errorf("environment %q lets sandboxes reach the network, which on the local backend goes through the harness's egress proxy and its static netd helper: %w", env.Name, why)
	}
	box, err := x.secretBox(ctx)
	if err != nil {
		return nil, store.SandboxEgress{}, err
	}
	allow, err := allowDomains(env)
	if err != nil {
		return nil, store.SandboxEgress{}, err
	}
	return box, store.SandboxEgress{SandboxID: sandboxID, SessionID: sessionID, Environment: env.Name,
		BlockAll: env.BlockAll, AllowDomains: recordedAllow(allow, env.Settings.AllowCIDRs), CreatedAt: time.Now()}, nil
}

// sealState seals a proxy's state for sandboxID's record.
func sealState(box *secretbox.Box, sandboxID string, st egress.State) ([]byte, error) {
	raw, _ := json.Marshal(st)
	enc, err := box.Seal(raw, controlplane.EgressStateLabel(sandboxID))
	if err != nil {
		return nil, fmt.Errorf("sealing the egress state of sandbox %s: %w", sandboxID, err)
	}
	return enc, nil
}

// Ensure makes the proxy of an existing sandbox serve in this process. It reports
// whether it had to recreate it; either way a Running sandbox reaches it as it is (the
// new listener is at the same path in the directory the sandbox has bound). A sandbox
// without recorded egress state (block_all, or made without a proxy) needs nothing:
// (false, nil).
func (x *Proxies) Ensure(ctx context.Context, sessionID, sandboxID string) (bool, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if r, ok := x.live[sandboxID]; ok {
		if r.ours() {
			return false, nil
		}
		// Another harness process took the socket over (or removed it on exit): serve
		// anew here, at the same path, so that this process's proxy is the one reached.
		x.closeLocked(sandboxID, r)
	}
	rec, err := x.cfg.Store.GetSandboxEgress(ctx, sandboxID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if x.cfg.Helper == "" {
		return false, fmt.Errorf("sandbox %s needs its egress proxy and the netd helper: %w", sandboxID, x.cfg.HelperErr)
	}
	box, err := x.secretBox(ctx)
	if err != nil {
		return false, err
	}
	raw, err := box.Open(rec.StateEnc, controlplane.EgressStateLabel(sandboxID))
	if err != nil {
		return false, fmt.Errorf("the egress state of sandbox %s cannot be opened with this control plane's secret key: %w", sandboxID, err)
	}
	var st egress.State
	if err := json.Unmarshal(raw, &st); err != nil {
		return false, fmt.Errorf("the egress state of sandbox %s is damaged: %w", sandboxID, err)
	}
	r, err := x.start(ctx, rec, &st)
	if err != nil {
		return false, err
	}
	x.live[sandboxID] = r
	return true, nil
}

// start builds, listens and serves one proxy. Called with mu held.
func (x *Proxies) start(ctx context.Context, rec store.SandboxEgress, st *egress.State) (*running, error) {
	sessionID := rec.SessionID
	cfg := egress.Config{
		SandboxID: rec.SandboxID,
		Policy:    policyOf(rec), // cidrs.go
		Secrets:   x.secretSource(rec.SessionID, rec.Environment),
		State:     st,
		Resolver:  x.cfg.Resolver, AllowAddrs: x.cfg.AllowAddrs, RootCAs: x.cfg.RootCAs, SystemRoots: x.cfg.SystemRoots,
	}
	if rec := x.cfg.Record; rec != nil {
		cfg.Log = func(d egress.Decision) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			rec(ctx, sessionID, events.Egress(d))
		}
	}
	p, err := egress.New(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("egress proxy of sandbox %s: %w", rec.SandboxID, err)
	}
	if err := x.makeSocketDir(rec.SandboxID); err != nil {
		return nil, err
	}
	sock := x.SocketPath(rec.SandboxID)
	if len(sock) > maxSocketPath {
		return nil, fmt.Errorf("egress socket path %s is %d bytes, over the %d a unix socket allows; set TMPDIR to a shorter directory", sock, len(sock), maxSocketPath)
	}
	ln, err := egress.Listen(sock)
	if err != nil {
		return nil, err
	}
	if ul, ok := ln.(*net.UnixListener); ok {
		// Close must not unlink by path: another harness process may have replaced the
		// file with its own socket by then (closeLocked removes ours).
		ul.SetUnlinkOnClose(false)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		ln.Close()
		return nil, err
	}
	r := &running{proxy: p, sock: sock, file: fi, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := p.Serve(ln); err != nil {
			x.cfg.Logger.Warn("egress proxy stopped", "sandbox", rec.SandboxID, "err", err)
		}
	}()
	return r, nil
}

// secretSource reads environment's secrets at each call, opened with the secret box,
// for a sandbox of session sessionID: only while the owner of the session's agent may
// use them (store.Environment.UsableBy), read at each call too, so that an environment
// unshared under a running sandbox stops lending its secrets at the next request.
func (x *Proxies) secretSource(sessionID, environment string) egress.SecretSource {
	return func(ctx context.Context) ([]egress.Secret, error) {
		box, err := x.secretBox(ctx)
		if err != nil {
			return nil, err
		}
		list, err := x.secretsFor(ctx, sessionID, environment)
		if err != nil {
			return nil, err
		}
		out := make([]egress.Secret, 0, len(list))
		for _, s := range list {
			v, err := box.Open(s.ValueEnc, controlplane.SecretLabel(s.ID))
			if err != nil {
				return nil, fmt.Errorf("secret %s cannot be opened with this control plane's secret key: %w", s.ID, err)
			}
			out = append(out, egress.Secret{Name: s.EnvName, Value: string(v), Hosts: s.Hosts})
		}
		return out, nil
	}
}

// secretsFor reads the secrets of environment for the sandbox of session sessionID,
// refused unless the owner of the session's agent may use them. A session or agent that
// cannot be read is refused too (no owner, no consent), unless there are no secrets to
// lend.
func (x *Proxies) secretsFor(ctx context.Context, sessionID, environment string) ([]store.Secret, error) {
	list, c, err := x.cfg.Store.SessionSecrets(ctx, sessionID, environment)
	if errors.Is(err, store.ErrNotFound) {
		list, lerr := x.cfg.Store.ListSecrets(ctx, environment)
		if lerr != nil || len(list) > 0 {
			return nil, errors.Join(err, lerr)
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(list) > 0 && !c.Allowed() {
		return nil, fmt.Errorf("environment %q is owned by %q and its secrets are not shared with %q, the owner of agent %q (trueforge_environment.shared_with)",
			environment, c.EnvOwner, c.AgentOwner, c.Agent)
	}
	return list, nil
}

// Detach closes the proxy of sandboxID, if it runs here; forget also deletes its
// recorded state and its socket directory, once empty (the sandbox is gone for good).
func (x *Proxies) Detach(ctx context.Context, sandboxID string, forget bool) {
	x.mu.Lock()
	if r, ok := x.live[sandboxID]; ok {
		x.closeLocked(sandboxID, r)
	}
	if forget {
		_ = os.Remove(x.sandboxDir(sandboxID)) // fails while another process serves there
	}
	x.mu.Unlock()
	if forget {
		if err := x.cfg.Store.DeleteSandboxEgress(context.WithoutCancel(ctx), sandboxID); err != nil {
			x.cfg.Logger.Warn("forgetting egress state", "sandbox", sandboxID, "err", err)
		}
	}
}

func (x *Proxies) closeLocked(sandboxID string, r *running) {
	mine := r.ours()
	_ = r.proxy.Close()
	<-r.done
	if mine {
		_ = os.Remove(r.sock)
	}
	delete(x.live, sandboxID)
}

// Live lists the sandboxes whose proxy runs in this process.
func (x *Proxies) Live() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Sorted(maps.Keys(x.live))
}

// Close closes every proxy (their state stays recorded for Ensure) and keeps the
// sandboxes' socket directories: a sandbox that is still running has its directory
// bound, and the next process listens in it again. The temp-dir fallback directory is
// removed once no sandbox directory is left in it.
func (x *Proxies) Close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for id, r := range maps.Clone(x.live) {
		x.closeLocked(id, r)
	}
	if dir := x.socketDir(); dir != x.cfg.Dir {
		_ = os.Remove(dir) // fails while not empty: another process still serves there
	}
}

// Static reports whether path is a statically linked ELF executable (no program
// interpreter), as a netd helper must be: it runs inside sandboxes whose file system
// need not carry the host's dynamic loader and libraries.
func Static(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// HelperEnv names an explicit netd helper (a static trueforge-netd, or a static
// trueforge-harness, which serves as netd when started under the name "netd").
const HelperEnv = "TRUEFORGE_NETD"

// LocateHelper finds the netd helper for a harness whose executable is self: $TRUEFORGE_NETD,
// else self when it is static (the harness serves as netd), else a static trueforge-netd
// beside self. The error says how to provide one.
func LocateHelper(self string) (string, error) {
	if p := os.Getenv(HelperEnv); p != "" {
		if ok, err := Static(p); err != nil || !ok {
			return "", fmt.Errorf("%s=%s is not a static executable (build it with CGO_ENABLED=0): %v", HelperEnv, p, err)
		}
		return p, nil
	}
	var tried bytes.Buffer
	for _, c := range []string{self, filepath.Join(filepath.Dir(self), "trueforge-netd")} {
		ok, err := Static(c)
		if err == nil && ok {
			return c, nil
		}
		if err == nil {
			err = errors.New("dynamically linked")
		}
		fmt.Fprintf(&tried, "; %s: %v", c, err)
	}
	return "", fmt.Errorf("no static netd helper found (build trueforge-harness with CGO_ENABLED=0, or put a static trueforge-netd beside it, or set %s)%s", HelperEnv, tried.String())
}
