package lifecycle

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Warm pools (issue 28). An environment's warm_pool asks for size sandboxes made ahead
// of any session, so that the first sandbox call of a session takes one instead of
// waiting for a create (1.2 to 1.7 s on Daytona). KeepPools, run by `serve` every
// PoolInterval, fills each pool from the environment's current snapshot and settings
// (env, network, secrets, volumes, limits: the create request a session's own sandbox
// would get) and deletes the members that no longer match it, that waited unclaimed
// past max_age, or that a smaller size no longer needs. provision claims a member whose
// create request digest (poolConfig) is the one its own create would have had, so a
// member made before a change is never handed out, and creates a sandbox when there is
// none.
//
// A claim deletes the member's row (store.ClaimPoolSandbox), so a member is handed out
// at most once across replicas, and a claimed sandbox never returns to a pool: a pooled
// sandbox has run nobody's code. A pool's keeper holds the pool's lease, so two
// replicas do not both fill it.
//
// A member of an environment whose sandboxes reach the network through this harness's
// egress proxy (the local backend without block_all) is made with its proxy prepared
// (Network.Prepare: CA and placeholders in its environment, nothing served, no
// session's secrets lent) and the sealed state kept in its row; the claiming session
// adopts it (Network.Adopt), so the proxy serves that session from its first request:
// its agent's owner's consent to the secrets, its log for the decisions, and the
// secrets' values read at each request (a rotation reaches a claimed member as it
// reaches any running sandbox). Placeholders exist only for the secrets the environment
// had when the member was made, so the secrets' names are part of the digest: a secret
// added or removed replaces the members.
//
// A claim relabels the member for its session (sandbox.Relabeler, where the backend
// can), so that what lists the backend's sandboxes sees the session's labels. The
// backend's own idle timings of a member are the pool's, not the claiming agent's (they
// outlast max_age); the harness's reaper enforces the agent's from the claim on.

// LabelPool marks a warm pool's member with its environment's name, until a session
// claims it and it is relabelled with the session's labels.
const LabelPool = "trueforge.pool"

// PoolIDPrefix starts the id of every pool member: "tf-p-<environment>-<random>".
const PoolIDPrefix = "tf-p-"

// PoolInterval is how often `serve` keeps the warm pools.
const PoolInterval = 5 * time.Second

// DefaultPoolMaxAge is a member's max_age when the environment sets none.
const DefaultPoolMaxAge = time.Hour

// fromPool is the From of a pool member's Transition.
const fromPool = "pooled"

// poolSize is env's warm pool's size and max_age (0 when it keeps none).
func poolSize(env store.Environment) (int, time.Duration) {
	wp := env.Settings.WarmPool
	if wp == nil || wp.Size <= 0 {
		return 0, 0
	}
	age := time.Duration(wp.MaxAgeSeconds) * time.Second
	if age <= 0 {
		age = DefaultPoolMaxAge
	}
	return int(wp.Size), age
}

// poolConfig is the digest of what req, a request only to be digested (no id, no
// proxy), makes for agent a, besides whom it is for (id, the harness's labels, the
// agent's idle timings): two requests with one digest make the same sandbox. A runtime
// whose snapshots are files on a machine adds its place, so that a member is claimed
// only where it runs; a proxied environment adds its proxy's policy and its secrets'
// names (proxiedPolicy).
func (m *Manager) poolConfig(ctx context.Context, rt sandbox.Runtime, a *agents.Agent, req sandbox.CreateRequest) (string, error) {
	proxy, err := m.proxiedPolicy(ctx, a)
	if err != nil {
		return "", err
	}
	labels := map[string]string{}
	for k, v := range req.Labels {
		if !sandbox.ReservedLabel(k) {
			labels[k] = v
		}
	}
	place := ""
	if pl, ok := rt.(sandbox.Placed); ok {
		place = pl.SnapshotPlace().String()
	}
	b, _ := json.Marshal(struct {
		Snapshot     string
		Env          map[string]string
		Block        bool
		Limits       sandbox.Limits
		AllowDomains []string
		Secrets      map[string]string
		AllowCIDRs   []string
		Volumes      []sandbox.VolumeMount
		Labels       map[string]string
		DeleteOnStop bool
		Place        string
		Proxy        *egressPolicy `json:",omitempty"`
	}{req.SnapshotID, req.Env, req.BlockNetwork, req.Limits, req.AllowDomains, req.Secrets, req.AllowCIDRs, req.Volumes, labels,
		req.Lifecycle.DeleteOnStop, place, proxy})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// egressPolicy is what a proxied sandbox's proxy is made with, for the pool's digest.
type egressPolicy struct {
	Allow   []string
	Secrets []string
}

// proxiedPolicy is the policy a's environment's egress proxy is made with (allowed
// domains and CIDRs, the secrets' names, which get placeholders), or nil when its
// sandboxes have no proxy of this harness's.
func (m *Manager) proxiedPolicy(ctx context.Context, a *agents.Agent) (*egressPolicy, error) {
	env := a.Environment
	if env.BlockAll || !m.proxied(a.Provider.Type) {
		return nil, nil
	}
	allow, err := sandboxAllow(env, map[string]any{})
	if err != nil {
		return nil, err
	}
	secrets, err := m.cfg.Store.ListSecrets(ctx, env.Name)
	if err != nil {
		return nil, err
	}
	p := &egressPolicy{Allow: append(allow, env.Settings.AllowCIDRs...)}
	for _, s := range secrets {
		p.Secrets = append(p.Secrets, s.EnvName)
	}
	slices.Sort(p.Secrets)
	return p, nil
}

// fromPool claims a member of a's environment's warm pool for session sessionID, when
// the environment keeps one and a member made as this session's sandbox would be is
// ready: claimed is then true and made is the request the member stands for (its id
// the member's, egress set when it was adopted with a proxy). A failure to claim is
// logged, not returned: the caller creates a sandbox instead; err is what refuses the
// sandbox itself (volumes, network), as a create would.
func (m *Manager) fromPool(ctx context.Context, rt sandbox.Runtime, sessionID string, a *agents.Agent, labels map[string]string) (made newSandbox, claimed bool, err error) {
	if size, _ := poolSize(a.Environment); size == 0 {
		return made, false, nil
	}
	if made, err = m.newRequest(ctx, sessionID, a, "", labels); err != nil {
		return made, false, err
	}
	p, claimed, err := m.claim(ctx, rt, sessionID, a, made.req)
	if err != nil {
		m.cfg.Logger.Warn("claiming a warm pool sandbox failed; creating one", "session", sessionID, "environment", a.Environment.Name, "err", err)
	}
	if !claimed {
		return made, false, nil
	}
	made.req.ID, made.egress = p.SandboxID, p.Egress
	return made, true, nil
}

// claim takes a pool member made with the digest of want, a request only to be
// digested for session sessionID's sandbox, or ok false. The member's row is gone
// once claimed: if the box is gone too (deleted out of band), or cannot be made the
// session's (adopt), it is deleted and the next member tried.
func (m *Manager) claim(ctx context.Context, rt sandbox.Runtime, sessionID string, a *agents.Agent, want sandbox.CreateRequest) (store.PoolSandbox, bool, error) {
	env := a.Environment
	cfg, err := m.poolConfig(ctx, rt, a, want)
	if err != nil {
		return store.PoolSandbox{}, false, err
	}
	for range 3 {
		p, ok, err := m.cfg.Store.ClaimPoolSandbox(ctx, env.Name, cfg)
		if err != nil || !ok {
			return store.PoolSandbox{}, false, err
		}
		// Whether the box still runs and its relabelling are asked at once: on Daytona
		// each is a round trip of the API, and a box found not running is deleted anyway.
		var info sandbox.SandboxInfo
		var gerr error
		var wg sync.WaitGroup
		wg.Go(func() { info, gerr = rt.Get(ctx, p.SandboxID) })
		rerr := m.relabel(ctx, rt, sessionID, p, want.Labels)
		wg.Wait()
		if gerr == nil && info.Status == sandbox.SandboxRunning {
			err := rerr
			if err == nil {
				err = m.adopt(ctx, sessionID, p)
			}
			if err == nil {
				return p, true, nil
			}
			m.cfg.Logger.Warn("a claimed warm pool sandbox could not be made the session's; deleting it", "session", sessionID, "sandbox", p.SandboxID, "err", err)
		}
		// Not usable as it is (stopped by the backend's own idle timer, or gone): a
		// fresh create is as fast as a start, and the box is nobody's now.
		m.discard(context.WithoutCancel(ctx), rt, p)
	}
	return store.PoolSandbox{}, false, nil
}

// relabel gives claimed member p its session's labels, where the backend can relabel.
func (m *Manager) relabel(ctx context.Context, rt sandbox.Runtime, sessionID string, p store.PoolSandbox, labels map[string]string) error {
	rl, ok := rt.(sandbox.Relabeler)
	if !ok {
		return nil
	}
	if err := rl.Relabel(ctx, p.SandboxID, labels); err != nil {
		return fmt.Errorf("relabelling warm pool sandbox %s for session %s: %w", p.SandboxID, sessionID, err)
	}
	return nil
}

// adopt makes claimed member p's prepared egress, if it was made with a proxy, session
// sessionID's: recorded for the session and served here.
func (m *Manager) adopt(ctx context.Context, sessionID string, p store.PoolSandbox) error {
	if p.Egress == "" {
		return nil
	}
	if m.cfg.Network == nil {
		return fmt.Errorf("warm pool sandbox %s was prepared with an egress proxy, which this harness does not run", p.SandboxID)
	}
	return m.cfg.Network.Adopt(ctx, sessionID, p.SandboxID, p.Egress)
}

// discard deletes a member's box (its row is gone already) and what its proxy left.
func (m *Manager) discard(ctx context.Context, rt sandbox.Runtime, p store.PoolSandbox) {
	_ = deleted(rt.Delete(ctx, p.SandboxID))
	if p.Egress != "" && m.cfg.Network != nil {
		m.cfg.Network.Detach(ctx, p.SandboxID, true)
	}
}

// KeepPools is one pass of the warm pools' keeper: each environment's pool filled to
// its size, members that no longer match their environment or waited past max_age
// deleted, and the members of environments that are gone deleted. It returns what it
// did, a member's creation as a Transition to "pooled" and its deletion as one from
// "pooled" to deleted (what `serve` prints with the reaper's).
func (m *Manager) KeepPools(ctx context.Context) ([]Transition, error) {
	envs, err := m.cfg.Store.ListEnvironments(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing environments for their warm pools: %w", err)
	}
	members, err := m.cfg.Store.ListPoolSandboxes(ctx)
	if err != nil {
		return nil, err
	}
	byEnv := map[string][]store.PoolSandbox{}
	for _, p := range members {
		byEnv[p.Environment] = append(byEnv[p.Environment], p)
	}
	var out []Transition
	for _, env := range envs {
		if size, _ := poolSize(env); size == 0 && len(byEnv[env.Name]) == 0 {
			continue
		}
		release, held, err := HoldLease(ctx, m.cfg.Store, PoolLeaseName(env.Name), m.cfg.Owner, m.cfg.LeaseTTL, m.cfg.Logger)
		if err != nil {
			out = append(out, Transition{From: fromPool, Err: err})
			continue
		}
		if held {
			out = append(out, m.keepPool(ctx, env, byEnv[env.Name])...)
			release()
		}
	}
	providers := map[string]bool{}
	for name, left := range byEnv {
		for _, p := range left {
			providers[p.Provider] = true
		}
		if !slicesHasEnv(envs, name) {
			for _, p := range left {
				out = append(out, m.dropMember(ctx, p))
			}
		}
	}
	for _, env := range envs {
		if size, _ := poolSize(env); size > 0 {
			providers[env.Provider] = true
		}
	}
	if len(providers) > 0 {
		out = append(out, m.sweepPoolOrphans(ctx, providers, members)...) // pool_orphans.go
	}
	return out, nil
}

// PoolLeaseName is the lease a keeper holds while it keeps an environment's pool.
func PoolLeaseName(env string) string { return "pool/" + env }

func slicesHasEnv(envs []store.Environment, name string) bool {
	for _, e := range envs {
		if e.Name == name {
			return true
		}
	}
	return false
}

// keepPool keeps one environment's pool, from its members as listed.
func (m *Manager) keepPool(ctx context.Context, env store.Environment, members []store.PoolSandbox) []Transition {
	size, maxAge := poolSize(env)
	var out []Transition
	var pa *agents.Agent
	var rt sandbox.Runtime
	want := ""
	if size > 0 {
		var err error
		if pa, rt, want, err = m.poolTarget(ctx, env); err != nil {
			// Not poolable now (building, not Ready, proxied): the members made before
			// no longer match, and none is made until it is.
			m.cfg.Logger.Debug("environment's warm pool is not filled", "environment", env.Name, "err", err)
			size = 0
		}
	}
	now := m.cfg.Now()
	keep := 0
	for _, p := range members {
		switch {
		case p.State == store.PoolCreating && now.Sub(p.CreatedAt) < StaleChange:
			if p.Config == want {
				keep++ // another keeper is creating it
			}
			continue
		case p.State == store.PoolCreating, p.Config != want, now.Sub(p.CreatedAt) >= maxAge, keep >= size:
			// Its keeper died midway, its environment changed, it waited too long, or the
			// pool is smaller now.
			out = append(out, m.dropMember(ctx, p))
		default:
			keep++
		}
	}
	for ; keep < size; keep++ {
		tr := m.addMember(ctx, pa, rt, want)
		out = append(out, tr)
		if tr.Err != nil {
			break // the next pass tries again
		}
	}
	return out
}

// poolTarget is what env's members are made as: a stand-in agent of the environment's
// owner (whose volumes and secrets the environment may use), its runtime, and the
// digest a member must have. An environment that is not Ready or not poolable is an
// error.
func (m *Manager) poolTarget(ctx context.Context, env store.Environment) (*agents.Agent, sandbox.Runtime, string, error) {
	snap, err := m.cfg.Store.GetSnapshot(ctx, env.SnapshotID)
	if err != nil {
		return nil, nil, "", fmt.Errorf("snapshot %s of environment %q: %w", env.SnapshotID, env.Name, err)
	}
	if snap.Status != sandbox.StatusReady {
		return nil, nil, "", fmt.Errorf("environment %q is %s, not Ready", env.Name, snap.Status)
	}
	p, err := m.cfg.Store.GetSandboxProvider(ctx, env.Provider)
	if err != nil {
		return nil, nil, "", fmt.Errorf("sandbox provider %q of environment %q: %w", env.Provider, env.Name, err)
	}
	rt, err := m.cfg.Runtimes.Runtime(ctx, p)
	if err != nil {
		return nil, nil, "", err
	}
	if err := m.checkPlace(ctx, rt, env.Name, env.SnapshotID); err != nil {
		return nil, nil, "", err
	}
	pa := &agents.Agent{Owner: env.Owner, Environment: env, Provider: p, Snapshot: snap}
	want, err := m.memberConfig(ctx, rt, pa)
	if err != nil {
		return nil, nil, "", err
	}
	return pa, rt, want, nil
}

// memberConfig is the digest a member of pa's environment is made with now.
func (m *Manager) memberConfig(ctx context.Context, rt sandbox.Runtime, pa *agents.Agent) (string, error) {
	d, err := m.newRequest(ctx, "", pa, "", nil)
	if err != nil {
		return "", err
	}
	return m.poolConfig(ctx, rt, pa, d.req)
}

// addMember creates one member of pa's environment's pool. Its row is written first
// (creating), so that a replica counts it, and marked ready once the box runs.
func (m *Manager) addMember(ctx context.Context, pa *agents.Agent, rt sandbox.Runtime, want string) Transition {
	env := pa.Environment
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	id := PoolIDPrefix + env.Name + "-" + hex.EncodeToString(rnd[:])
	tr := Transition{SandboxID: id, To: fromPool}
	if cfg, err := m.memberConfig(ctx, rt, pa); err != nil || cfg != want {
		tr.Err = fmt.Errorf("preparing a warm pool member of environment %q: %w", env.Name,
			errors.Join(err, errors.New("the environment changed while its pool member was prepared")))
		return tr
	}
	made, err := m.newRequest(ctx, "", pa, id, map[string]string{LabelPool: env.Name, LabelOwner: env.Owner, LabelEnvironment: env.Name})
	req := made.req
	// A backend that stops idle sandboxes itself (Daytona) would stop a waiting member
	// at the agent's default idle stop, long before max_age, and a stopped member is
	// not handed out: it waits a minute past max_age instead, by when the keeper has
	// replaced it.
	_, maxAge := poolSize(env)
	req.Lifecycle = sandboxLifecycle(Timings{IdleStop: maxAge + time.Minute, Archive: maxAge + 2*time.Minute, Delete: maxAge + 3*time.Minute})
	req.Lifecycle.DeleteOnStop = env.Settings.GPU > 0
	row := store.PoolSandbox{SandboxID: id, Environment: env.Name, Provider: env.Provider, SnapshotID: env.SnapshotID,
		Config: want, State: store.PoolCreating, CreatedAt: m.cfg.Now(), Egress: made.egress}
	if err != nil {
		tr.Err = fmt.Errorf("preparing a warm pool member of environment %q: %w", env.Name, err)
		return tr
	}
	if err := m.cfg.Store.PutPoolSandbox(ctx, row); err != nil {
		m.discard(context.WithoutCancel(ctx), rt, row) // the prepared proxy's directory
		tr.Err = err
		return tr
	}
	if err := rt.Create(ctx, req); err != nil {
		// A create that failed late (a timeout) may have left the box: it carries no
		// session label, so no orphan sweep would find it.
		m.discard(context.WithoutCancel(ctx), rt, row)
		_, _ = m.cfg.Store.TakePoolSandbox(context.WithoutCancel(ctx), id, store.PoolCreating)
		tr.Err = fmt.Errorf("creating a warm pool member of environment %q (snapshot %s): %w", env.Name, env.SnapshotID, err)
		return tr
	}
	ok, err := m.cfg.Store.MarkPoolSandboxReady(ctx, id)
	if err != nil || !ok {
		// Taken as stale meanwhile (or the database failed): nobody may claim it.
		m.discard(context.WithoutCancel(ctx), rt, row)
		tr.Err = fmt.Errorf("warm pool member %s of environment %q could not be marked ready: %w", id, env.Name, errors.Join(err, errors.New("its row is gone")))
	}
	return tr
}

// dropMember takes a member out of its pool and deletes its box; a member claimed (or
// dropped by another keeper) first is left alone.
func (m *Manager) dropMember(ctx context.Context, p store.PoolSandbox) Transition {
	tr := Transition{SandboxID: p.SandboxID, From: fromPool, To: store.SandboxStateDeleted}
	took, err := m.cfg.Store.TakePoolSandbox(ctx, p.SandboxID, p.State)
	if err != nil || !took {
		tr.Err = err
		if err == nil {
			tr.To = "claimed" // a session took it first: nothing to do
		}
		return tr
	}
	prov, err := m.cfg.Store.GetSandboxProvider(ctx, p.Provider)
	if err == nil {
		var rt sandbox.Runtime
		if rt, err = m.cfg.Runtimes.Runtime(ctx, prov); err == nil {
			if err = deleted(rt.Delete(ctx, p.SandboxID)); err == nil && p.Egress != "" && m.cfg.Network != nil {
				m.cfg.Network.Detach(ctx, p.SandboxID, true)
			}
		}
	}
	if err != nil {
		tr.Err = fmt.Errorf("deleting warm pool member %s of environment %q: %w", p.SandboxID, p.Environment, err)
	}
	return tr
}

// newSandbox is a create request with what making it took besides.
type newSandbox struct {
	req sandbox.CreateRequest
	// network is the summary of the sandbox_provisioned event.
	network map[string]any
	// egress is a pool member's prepared egress (Network.Prepare), for its row.
	egress string
}

// newRequest is the create request of a sandbox of a's environment for sessionID ("" for
// a pool member), with id ("" for a request only to be digested, poolConfig) and the
// harness's labels under labels: snapshot, env, limits, volumes (volumes.go), network
// (network.go, which starts a session sandbox's egress proxy, or prepares a member's)
// and live settings (create_request.go).
func (m *Manager) newRequest(ctx context.Context, sessionID string, a *agents.Agent, id string, labels map[string]string) (newSandbox, error) {
	env := a.Environment
	req := sandbox.CreateRequest{
		ID:           id,
		SnapshotID:   env.SnapshotID,
		Env:          env.Env,
		BlockNetwork: env.BlockAll,
		Limits:       sandbox.Limits{CPU: env.CPU, MemoryMB: env.MemoryGB * 1024, DiskMB: env.DiskGB * 1024},
		Labels:       maps.Clone(labels),
	}
	if err := m.volumes(ctx, env, a, &req); err != nil { // volumes.go
		return newSandbox{req: req}, err
	}
	network, prepared, err := m.network(ctx, sessionID, a, &req)
	if err != nil {
		return newSandbox{req: req}, err
	}
	liveSettings(&req, a, network) // labels, CIDRs, lifecycle timings (create_request.go)
	return newSandbox{req: req, network: network, egress: prepared}, nil
}

// deleted is err, or nil when it says the sandbox is gone already: what deleting it was for.
func deleted(err error) error {
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil
	}
	return err
}
