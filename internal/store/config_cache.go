package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// The config cache: a plan refreshes and plans every resource of a configuration, and
// each one reads the published configuration (its sandbox provider, environment and
// snapshot, secret or agent). On a database across a network, a query per read is a
// round trip per resource. With the cache on (EnableConfigCache), the first such read
// loads the configuration tables in one read-only transaction, a consistent snapshot of
// the control plane (REPEATABLE READ on PostgreSQL, a WAL read transaction on SQLite),
// and the reads are served from memory until the next write through this Store drops it;
// the read after that loads again. A load is configLoadQueries statements, whatever the
// number of rows.
//
// The cache stays on only while it saves queries. When writes drop copies that served
// fewer reads than a load costs, twice in a row (cacheStrikes), the store's work is mostly
// writes: an apply creating resources, each read followed by a write, where reloading the
// whole configuration after every write would cost more than it saves, and more as the
// control plane grows. The cache then turns itself off, and every later read queries the
// database, as without it. A plan's reads are hundreds to one load; a write among them (a
// refresh that records a build's outcome) costs one more load.
//
// What is cached is exactly what the uncached reads return to this connection's role:
// the load runs the same selects, so row-level security hides the same rows (another
// team's secrets) and a row it hides is ErrNotFound either way. Callers get copies: what
// they change in a returned value never reaches the cache.
//
// It is for a process whose reads may see the control plane as of one moment, as a plan
// does; writes by other processes are not seen until this one writes. Reads that wait for
// another process (Coordinator.Wait polling a build) use Fresh, and the harness never
// turns the cache on.

// configLoadQueries is what one load costs in statements: begin, one select per table
// (sandbox providers with their volumes and registries, environments, the snapshots they
// reference, secrets, agents), and commit. Environments come with their versions
// (environment_versions.go).
const configLoadQueries = 7

// cacheStrikes is how many copies in a row may be dropped before they served
// configLoadQueries reads until the cache turns itself off.
const cacheStrikes = 2

type configCache struct {
	// mu serialises loads: reads that find no valid copy wait for one load rather than
	// each running their own (Terraform calls the provider concurrently).
	mu  sync.Mutex
	cur atomic.Pointer[configSnapshot]
	// off is set when a load was refused for the role (ErrForbidden), or when writes
	// came faster than reads (see above): reads then go to the database, which answers
	// (or refuses) each as it would without the cache.
	off   atomic.Bool
	loads atomic.Int64
	// strikes counts the copies in a row dropped before they paid for their load.
	strikes int // guarded by mu
}

// configSnapshot is one consistent read of the configuration tables.
type configSnapshot struct {
	// gen is the store's write count when the load began: the copy is valid while the
	// count is unchanged.
	gen uint64
	// reads counts the reads the copy served.
	reads       atomic.Int64
	providers   []SandboxProvider // in the database's order
	volumes     []Volume          // by provider, then name (config_cache_children.go)
	registries  []Registry        // by provider, then name
	envs        []Environment     // ordered by name, as ListEnvironments
	envByName   map[string]int
	secrets     []Secret // ordered by environment, then variable name
	secretByID  map[string]int
	agents      []Agent // ordered by name
	agentByName map[string]int
	// snapshots are those that an environment or a provider references: what a plan
	// reads. Another id is read from the database.
	snapshots map[string]Snapshot
	// versions are each environment's history, oldest first (environment_versions.go).
	versions map[string][]versionRow
}

// EnableConfigCache turns the config cache on for this Store (see above). Call it once,
// before the Store is shared between goroutines.
func (s *Store) EnableConfigCache() {
	if s.cache == nil {
		s.cache = &configCache{}
	}
}

// ConfigLoads is how many times the config cache loaded the configuration (0 when it was
// never turned on): for tests and measurements.
func (s *Store) ConfigLoads() int64 {
	if s.cache == nil {
		return 0
	}
	return s.cache.loads.Load()
}

// Fresh returns a view of s whose reads always query the database: for a read that must
// see what other processes wrote since, such as a wait for a build another apply runs.
// It shares s's connections, and its writes drop s's config cache as s's own do.
func (s *Store) Fresh() *Store {
	f := *s
	f.cache = nil
	return &f
}

// config returns the cached configuration, loading it when there is no valid copy, or
// nil when reads must query the database: the cache is off, or the load failed (the
// database then answers the read itself, with its own error if it fails again).
func (s *Store) config(ctx context.Context) *configSnapshot {
	c := s.cache
	if c == nil || c.off.Load() {
		return nil
	}
	if cur := c.cur.Load(); cur != nil && cur.gen == s.db.writes.Load() {
		cur.reads.Add(1)
		return cur
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	gen := s.db.writes.Load()
	cur := c.cur.Load()
	if cur != nil && cur.gen == gen {
		cur.reads.Add(1)
		return cur
	}
	if cur != nil {
		if cur.reads.Load() >= configLoadQueries {
			c.strikes = 0
		} else if c.strikes++; c.strikes >= cacheStrikes {
			// Writes outpace reads: see above.
			c.off.Store(true)
			c.cur.Store(nil)
			return nil
		}
	}
	snap, err := s.loadConfig(ctx, gen)
	if err != nil {
		if errors.Is(err, ErrForbidden) {
			c.off.Store(true)
		}
		return nil
	}
	c.loads.Add(1)
	snap.reads.Add(1)
	c.cur.Store(snap)
	// Even when a write ran meanwhile (so the copy is stale for later reads), it is a
	// consistent read that began after every write that finished before this one: this
	// read may use it.
	return snap
}

// loadConfig reads the configuration tables in one read-only transaction.
func (s *Store) loadConfig(ctx context.Context, gen uint64) (*configSnapshot, error) {
	opts := &sql.TxOptions{ReadOnly: true}
	if s.db.dialect == postgres {
		opts.Isolation = sql.LevelRepeatableRead
	}
	s.db.count()
	sqlTx, err := s.db.sql.BeginTx(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("beginning the read of the configuration: %w", err)
	}
	defer func() { _ = sqlTx.Rollback() }() // after a commit, only sql.ErrTxDone
	tx := &txn{tx: sqlTx, d: s.db}
	snap := &configSnapshot{gen: gen}
	if snap.providers, snap.volumes, snap.registries, err = selectProvidersWithChildren(ctx, tx, s.db.dialect); err != nil {
		return nil, err
	}
	if snap.envs, snap.versions, err = selectEnvironmentsWithVersions(ctx, tx, s.db.dialect); err != nil {
		return nil, err
	}
	snaps, err := selectAll(ctx, tx, snapshotSelect+` WHERE id IN (SELECT snapshot_id FROM environments)
		OR id IN (SELECT release_snapshot FROM sandbox_providers)`, scanSnapshot)
	if err != nil {
		return nil, err
	}
	if snap.secrets, err = selectAll(ctx, tx, secretSelect+` ORDER BY environment, env_name`, scanSecret); err != nil {
		return nil, err
	}
	if snap.agents, err = selectAll(ctx, tx, agentSelect+` ORDER BY name`, scanAgent); err != nil {
		return nil, err
	}
	s.db.count()
	if err := sqlTx.Commit(); err != nil {
		return nil, fmt.Errorf("ending the read of the configuration: %w", err)
	}
	snap.envByName = index(snap.envs, func(e Environment) string { return e.Name })
	snap.secretByID = index(snap.secrets, func(s Secret) string { return s.ID })
	snap.agentByName = index(snap.agents, func(a Agent) string { return a.Name })
	snap.snapshots = make(map[string]Snapshot, len(snaps))
	for _, sn := range snaps {
		snap.snapshots[sn.ID] = sn
	}
	return snap, nil
}

// selectAll is queryRows for one table of the configuration, its errors saying so.
func selectAll[T any](ctx context.Context, q querier, query string, scan func(scanner) (T, error)) ([]T, error) {
	out, err := queryRows(ctx, q, scan, query)
	if err != nil {
		return nil, fmt.Errorf("reading the configuration: %w", err)
	}
	return out, nil
}

func index[T any](items []T, key func(T) string) map[string]int {
	m := make(map[string]int, len(items))
	for i, v := range items {
		m[key(v)] = i
	}
	return m
}

func (c *configSnapshot) provider(name string) (SandboxProvider, error) {
	for _, p := range c.providers {
		if name == "" || p.Name == name {
			return cloneProvider(p), nil
		}
	}
	return SandboxProvider{}, providerNotFound(name)
}

func (c *configSnapshot) environment(name string) (Environment, error) {
	i, ok := c.envByName[name]
	if !ok {
		return Environment{}, notFound("environment %q", name)
	}
	return cloneEnv(c.envs[i]), nil
}

func (c *configSnapshot) environments() []Environment {
	if c.envs == nil {
		return nil
	}
	out := make([]Environment, len(c.envs))
	for i, e := range c.envs {
		out[i] = cloneEnv(e)
	}
	return out
}

func (c *configSnapshot) snapshot(id string) (Snapshot, bool) {
	sn, ok := c.snapshots[id]
	return sn, ok
}

func (c *configSnapshot) secret(id string) (Secret, error) {
	i, ok := c.secretByID[id]
	if !ok {
		return Secret{}, notFound("secret %s", id)
	}
	return cloneSecret(c.secrets[i]), nil
}

func (c *configSnapshot) secretsOf(environment string) []Secret {
	var out []Secret
	for _, sec := range c.secrets {
		if sec.Environment == environment {
			out = append(out, cloneSecret(sec))
		}
	}
	return out
}

func (c *configSnapshot) agent(name string) (Agent, error) {
	i, ok := c.agentByName[name]
	if !ok {
		return Agent{}, notFound("agent %q", name)
	}
	a := c.agents[i]
	a.Spec = slices.Clone(a.Spec)
	return a, nil
}

func (c *configSnapshot) agentNames() []string {
	var out []string
	for _, a := range c.agents {
		out = append(out, a.Name)
	}
	return out
}

func (c *configSnapshot) agentsUsing(env string) []string {
	var out []string
	for _, a := range c.agents {
		if a.Environment == env && env != "" {
			out = append(out, a.Name)
		}
	}
	return out
}

func cloneProvider(p SandboxProvider) SandboxProvider {
	p.APIKeyEnc = slices.Clone(p.APIKeyEnc)
	p.Scopes = slices.Clone(p.Scopes)
	if p.RequireLimits != nil {
		v := *p.RequireLimits
		p.RequireLimits = &v
	}
	return p
}

func cloneEnv(e Environment) Environment {
	e.Triggers = maps.Clone(e.Triggers)
	e.Env = maps.Clone(e.Env)
	e.AllowDomains = slices.Clone(e.AllowDomains)
	e.SharedWith = slices.Clone(e.SharedWith)
	return e
}

func cloneSecret(s Secret) Secret {
	s.Hosts = slices.Clone(s.Hosts)
	s.ValueEnc = slices.Clone(s.ValueEnc)
	return s
}
