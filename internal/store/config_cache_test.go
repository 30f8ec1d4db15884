package store

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// planReads makes every read a plan makes of the configuration, for each name the
// control plane holds plus some it does not, and returns what each returned: value and
// error, as text that compares exactly (nil and empty differ).
func planReads(t *testing.T, st *Store, envs, secrets, agents, snapshots []string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	add := func(what string, v any, err error) {
		out = append(out, fmt.Sprintf("%s: %#v err=%v notfound=%v", what, v, err, errors.Is(err, ErrNotFound)))
	}
	p, err := st.OnlySandboxProvider(ctx)
	add("only provider", p, err)
	for _, name := range []string{"local", "missing"} {
		p, err := st.GetSandboxProvider(ctx, name)
		add("provider "+name, p, err)
	}
	all, err := st.ListEnvironments(ctx)
	add("environments", all, err)
	for _, name := range append(envs, "missing") {
		e, err := st.GetEnvironment(ctx, name)
		add("environment "+name, e, err)
		l, err := st.ListSecrets(ctx, name)
		add("secrets of "+name, l, err)
		u, err := st.AgentsUsing(ctx, name)
		add("agents using "+name, u, err)
	}
	for _, id := range append(secrets, "missing/X") {
		s, err := st.GetSecret(ctx, id)
		add("secret "+id, s, err)
	}
	names, err := st.ListAgentNames(ctx)
	add("agent names", names, err)
	for _, name := range append(agents, "missing") {
		a, err := st.GetAgent(ctx, name)
		add("agent "+name, a, err)
	}
	for _, id := range append(snapshots, "missing") {
		sn, err := st.GetSnapshot(ctx, id)
		add("snapshot "+id, sn, err)
	}
	for _, name := range []string{"vol-a", "vol-b", "missing"} {
		v, err := st.GetVolume(ctx, name)
		add("volume "+name, v, err)
	}
	for _, name := range []string{"reg-a", "missing"} {
		r, err := st.GetRegistry(ctx, name)
		add("registry "+name, r, err)
	}
	return out
}

// seedPlane stores a configuration of n environments (every one with a secret and an
// agent, plus an agent without a sandbox) owned by owner, and returns the names.
func seedPlane(t *testing.T, st *Store, owner string, n int) (envs, secrets, agents, snapshots []string) {
	t.Helper()
	ctx := context.Background()
	must(t, st.CreateSandboxProvider(ctx, SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: owner, Scopes: []string{"a", "b"}, ReleaseSnapshot: "snap-rel"}))
	must(t, st.RegisterReleaseSnapshot(ctx, "local", "snap-rel"))
	if _, _, err := st.ClaimSnapshot(ctx, Snapshot{ID: "snap-1", Provider: "local", BuildHash: "h1", Spec: "{}"}, "Building", "Failed"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.ClaimSnapshot(ctx, Snapshot{ID: "snap-orphan", Provider: "local", BuildHash: "h0", Spec: "{}"}, "Building", "Failed"); err != nil {
		t.Fatal(err)
	}
	must(t, st.SetSnapshotState(ctx, "snap-1", "Ready", "", "built"))
	for i := range n {
		name := fmt.Sprintf("env-%02d", i)
		e := Environment{ID: name, Name: name, Provider: "local", Owner: owner, Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 3,
			BuildHash: "h1", SnapshotID: "snap-1", Env: map[string]string{"I": fmt.Sprint(i)}, AllowDomains: []string{"pypi.org"}}
		if i%2 == 0 {
			e.Triggers = map[string]string{"t": "1"}
			e.BlockAll = true
		}
		must(t, st.CreateEnvironment(ctx, e))
		id := SecretID(name, "TOKEN")
		must(t, st.CreateSecret(ctx, Secret{ID: id, Environment: name, EnvName: "TOKEN", Hosts: []string{"api.example.com"}, ValueEnc: []byte("sealed-" + name)}))
		agent := "agent-" + name
		must(t, st.CreateAgent(ctx, Agent{ID: agent, Name: agent, Owner: owner, Environment: name, Spec: []byte(`{"i":` + fmt.Sprint(i) + `}`)}))
		envs, secrets, agents = append(envs, name), append(secrets, id), append(agents, agent)
	}
	must(t, st.CreateAgent(ctx, Agent{ID: "nosandbox", Name: "nosandbox", Owner: owner, Spec: []byte("{}")}))
	agents = append(agents, "nosandbox")
	// Volumes and a registry, read from the providers' row by the cache.
	must(t, st.CreateVolume(ctx, Volume{Name: "vol-b", Provider: "local", Owner: owner, RemoteID: "rb"}))
	must(t, st.CreateVolume(ctx, Volume{Name: "vol-a", Provider: "local", Owner: owner, RemoteID: "ra", SizeGB: 3, SharedWith: []string{"team_b", ShareAll}}))
	must(t, st.CreateRegistry(ctx, Registry{Name: "reg-a", Provider: "local", Owner: owner, URL: "registry.example.com", Username: "u",
		PasswordEnc: []byte{0, 1, 0xfe, 'x'}, Project: "p", RemoteID: "r1"}))
	return envs, secrets, agents, []string{"snap-1", "snap-rel", "snap-orphan"}
}

// A plan's reads, served by the cache, return exactly what the database returns, and
// all of them together cost one load: configLoadQueries statements, whatever the number
// of resources.
func TestConfigCacheServesPlanReadsFromOneLoad(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		envs, secrets, agents, snaps := seedPlane(t, st, "alice", 20)
		want := planReads(t, reopen(t, st), envs, secrets, agents, snaps)

		cached := reopen(t, st)
		cached.EnableConfigCache()
		before := cached.Queries()
		got := planReads(t, cached, envs, secrets, agents, snaps)
		if d := firstDiff(want, got); d != "" {
			t.Fatalf("a cached read differs from the database's:\n%s", d)
		}
		// The orphan snapshot is referenced by nothing, so it is not loaded: reading it
		// costs its own query (a plan never reads one), and so does the missing id.
		if n := cached.Queries() - before; n != configLoadQueries+2 {
			t.Fatalf("%d reads cost %d queries; want %d (one load) + 2 (snapshots nothing references)", len(got), n, configLoadQueries+2)
		}
		if n := cached.ConfigLoads(); n != 1 {
			t.Fatalf("%d loads; want 1", n)
		}
		// Reads again, after the load: no query at all.
		before = cached.Queries()
		planReads(t, cached, envs, secrets, agents, snaps[:2])
		if n := cached.Queries() - before; n != 1 { // the missing snapshot
			t.Fatalf("reads from a loaded cache cost %d queries; want 1 (the snapshot that does not exist)", n)
		}
	})
}

func firstDiff(want, got []string) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d results, want %d", len(got), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			return fmt.Sprintf("got  %s\nwant %s", got[i], want[i])
		}
	}
	return ""
}

// A value a caller changes is its own: the cache keeps what the database holds.
func TestConfigCacheReturnsCopies(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		envs, secrets, agents, _ := seedPlane(t, st, "alice", 1)
		st.EnableConfigCache()
		ctx := context.Background()
		e, _ := st.GetEnvironment(ctx, envs[0])
		e.Env["I"], e.AllowDomains[0] = "changed", "evil.example"
		s, _ := st.GetSecret(ctx, secrets[0])
		s.Hosts[0], s.ValueEnc[0] = "evil.example", 'X'
		a, _ := st.GetAgent(ctx, agents[0])
		a.Spec[0] = 'X'
		p, _ := st.OnlySandboxProvider(ctx)
		p.Scopes[0] = "changed"
		e2, _ := st.GetEnvironment(ctx, envs[0])
		s2, _ := st.GetSecret(ctx, secrets[0])
		a2, _ := st.GetAgent(ctx, agents[0])
		p2, _ := st.OnlySandboxProvider(ctx)
		if e2.Env["I"] != "0" || e2.AllowDomains[0] != "pypi.org" || s2.Hosts[0] != "api.example.com" || s2.ValueEnc[0] != 's' ||
			a2.Spec[0] != '{' || p2.Scopes[0] != "a" {
			t.Fatalf("a caller's change reached the cache: %+v %+v %s %+v", e2, s2, a2.Spec, p2)
		}
		if st.ConfigLoads() != 1 {
			t.Fatalf("%d loads; want 1", st.ConfigLoads())
		}
	})
}

// Every write through the store drops the cache, so the next read sees it: each kind of
// write the provider makes, a failed write, and a statement run with Exec.
func TestConfigCacheDroppedOnWrite(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		envs, secrets, agents, _ := seedPlane(t, st, "alice", 2)
		st.EnableConfigCache()
		ctx := context.Background()
		// load reads as a plan does, enough for the copy to pay for itself (the cache
		// stays on while it does: see the next test).
		load := func() {
			t.Helper()
			for range configLoadQueries {
				if _, err := st.GetEnvironment(ctx, envs[0]); err != nil {
					t.Fatal(err)
				}
			}
		}
		steps := []struct {
			what  string
			write func() error
			check func() error
		}{
			{"UpdateEnvironment", func() error {
				e, _ := st.GetEnvironment(ctx, envs[0])
				e.Image = "changed"
				return st.UpdateEnvironment(ctx, e)
			}, func() error {
				if e, _ := st.GetEnvironment(ctx, envs[0]); e.Image != "changed" {
					return fmt.Errorf("image %q", e.Image)
				}
				return nil
			}},
			{"CreateSecret", func() error {
				return st.CreateSecret(ctx, Secret{ID: SecretID(envs[0], "NEW"), Environment: envs[0], EnvName: "NEW", ValueEnc: []byte("x")})
			}, func() error {
				if l, _ := st.ListSecrets(ctx, envs[0]); len(l) != 2 {
					return fmt.Errorf("%d secrets", len(l))
				}
				return nil
			}},
			{"UpdateSecret", func() error { return st.UpdateSecret(ctx, secrets[0], []string{"new.example"}, []byte("rotated")) }, func() error {
				if s, _ := st.GetSecret(ctx, secrets[0]); s.Version != 2 || s.Hosts[0] != "new.example" {
					return fmt.Errorf("%+v", s)
				}
				return nil
			}},
			{"DeleteSecret", func() error { return st.DeleteSecret(ctx, secrets[1]) }, func() error {
				if _, err := st.GetSecret(ctx, secrets[1]); !errors.Is(err, ErrNotFound) {
					return fmt.Errorf("deleted secret: %v", err)
				}
				return nil
			}},
			{"UpdateAgent", func() error { return st.UpdateAgent(ctx, Agent{Name: agents[0], Spec: []byte(`{"new":1}`)}) }, func() error {
				if a, _ := st.GetAgent(ctx, agents[0]); string(a.Spec) != `{"new":1}` || a.Environment != "" {
					return fmt.Errorf("%+v", a)
				}
				return nil
			}},
			{"SetSnapshotState", func() error { return st.SetSnapshotState(ctx, "snap-1", "Failed", "gone", "") }, func() error {
				if sn, _ := st.GetSnapshot(ctx, "snap-1"); sn.Status != "Failed" {
					return fmt.Errorf("%+v", sn)
				}
				return nil
			}},
			{"UpdateSandboxProvider", func() error {
				p, _ := st.OnlySandboxProvider(ctx)
				p.APIURL = "https://changed.example"
				return st.UpdateSandboxProvider(ctx, p)
			}, func() error {
				if p, _ := st.GetSandboxProvider(ctx, "local"); p.APIURL != "https://changed.example" {
					return fmt.Errorf("%+v", p)
				}
				return nil
			}},
			{"CreateEnvironment that fails (it exists)", func() error {
				// Another process deletes an agent; this process's failed write must
				// still drop what it had.
				if _, err := reopen(t, st).Exec(ctx, `DELETE FROM agents WHERE name = ?`, agents[1]); err != nil {
					return err
				}
				if err := st.CreateEnvironment(ctx, Environment{ID: "x", Name: envs[0], Provider: "local", Owner: "alice", SnapshotID: "snap-1"}); !errors.Is(err, ErrAlreadyExists) {
					return fmt.Errorf("creating a duplicate: %v", err)
				}
				return nil
			}, func() error {
				if _, err := st.GetAgent(ctx, agents[1]); !errors.Is(err, ErrNotFound) {
					return fmt.Errorf("agent deleted elsewhere: %v", err)
				}
				return nil
			}},
			{"Exec", func() error {
				_, err := st.Exec(ctx, `UPDATE environments SET cpu = 4 WHERE name = ?`, envs[1])
				return err
			}, func() error {
				if e, _ := st.GetEnvironment(ctx, envs[1]); e.CPU != 4 {
					return fmt.Errorf("cpu %d", e.CPU)
				}
				return nil
			}},
			{"DeleteAgent, DeleteEnvironment", func() error {
				if err := st.DeleteAgent(ctx, agents[0]); err != nil {
					return err
				}
				return st.DeleteEnvironment(ctx, envs[0])
			}, func() error {
				if _, err := st.GetEnvironment(ctx, envs[0]); !errors.Is(err, ErrNotFound) {
					return fmt.Errorf("deleted environment: %v", err)
				}
				return nil
			}},
		}
		for _, step := range steps {
			load()
			loads := st.ConfigLoads()
			if err := step.write(); err != nil {
				t.Fatalf("%s: %v", step.what, err)
			}
			if err := step.check(); err != nil {
				t.Fatalf("after %s, the cached read is stale: %v", step.what, err)
			}
			if st.ConfigLoads() == loads {
				t.Fatalf("after %s: no new load", step.what)
			}
		}
	})
}

// Where writes outpace reads, as in an apply that creates resources (a read or two, then
// a write, for each), reloading after every write would cost more than the cache saves:
// after cacheStrikes copies dropped before they paid for their load, the cache turns
// itself off, and reads query the database, fresh. A plan with one write among its reads
// (a refresh recording a build's outcome) keeps it.
func TestConfigCacheTurnsOffWhenWritesOutpaceReads(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		envs, _, _, _ := seedPlane(t, st, "alice", 4)
		ctx := context.Background()

		plan := reopen(t, st)
		plan.EnableConfigCache()
		for i := range 3 {
			if _, err := plan.GetEnvironment(ctx, envs[i%len(envs)]); err != nil {
				t.Fatal(err)
			}
		}
		must(t, plan.SetSnapshotState(ctx, "snap-1", "Failed", "gone", ""))
		before := plan.Queries()
		for i := range 100 {
			if _, err := plan.GetEnvironment(ctx, envs[i%len(envs)]); err != nil {
				t.Fatal(err)
			}
		}
		if n := plan.Queries() - before; plan.ConfigLoads() != 2 || n != configLoadQueries {
			t.Fatalf("a plan with one early write: %d loads, %d queries for 100 reads; want 2 loads (one after the write), %d queries",
				plan.ConfigLoads(), n, configLoadQueries)
		}

		apply := reopen(t, st)
		apply.EnableConfigCache()
		const resources = 40
		before = apply.Queries()
		for i := range resources {
			e, err := apply.GetEnvironment(ctx, envs[i%len(envs)])
			if err != nil {
				t.Fatal(err)
			}
			e.Image = fmt.Sprint("image-", i)
			must(t, apply.UpdateEnvironment(ctx, e))
			if got, _ := apply.GetEnvironment(ctx, e.Name); got.Image != e.Image {
				t.Fatalf("write %d: read %q after writing %q", i, got.Image, e.Image)
			}
		}
		if apply.ConfigLoads() != cacheStrikes {
			t.Fatalf("%d loads for %d read-write-read steps; want %d, then none", apply.ConfigLoads(), resources, cacheStrikes)
		}
		uncached := reopen(t, st)
		before2 := uncached.Queries()
		for i := range resources {
			e, _ := uncached.GetEnvironment(ctx, envs[i%len(envs)])
			must(t, uncached.UpdateEnvironment(ctx, e))
			if _, err := uncached.GetEnvironment(ctx, e.Name); err != nil {
				t.Fatal(err)
			}
		}
		cached, plain := apply.Queries()-before, uncached.Queries()-before2
		if cached > plain+cacheStrikes*configLoadQueries {
			t.Fatalf("the apply cost %d queries with the cache, %d without: more than the %d loads it tried", cached, plain, cacheStrikes)
		}
	})
}

// A cached store sees the control plane as of its load, as one plan should; Fresh reads
// see another process's writes at once, and a write through Fresh drops the cache too.
// A store without the cache (the harness's) always reads the database.
func TestConfigCacheFreshAndUncachedReadsSeeOtherProcesses(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		envs, _, _, _ := seedPlane(t, st, "alice", 1)
		ctx := context.Background()
		plain := reopen(t, st)
		cached := reopen(t, st)
		cached.EnableConfigCache()
		if sn, _ := cached.GetSnapshot(ctx, "snap-1"); sn.Status != "Ready" {
			t.Fatalf("snapshot %+v", sn)
		}
		must(t, st.SetSnapshotState(ctx, "snap-1", "Failed", "deleted elsewhere", "tail"))
		if sn, _ := cached.GetSnapshot(ctx, "snap-1"); sn.Status != "Ready" {
			t.Fatalf("the cached store saw another process's write without a write of its own: %+v (a plan reads one moment)", sn)
		}
		if sn, _ := cached.Fresh().GetSnapshot(ctx, "snap-1"); sn.Status != "Failed" || sn.LogTail != "tail" {
			t.Fatalf("a Fresh read did not see another process's write: %+v", sn)
		}
		if sn, _ := plain.GetSnapshot(ctx, "snap-1"); sn.Status != "Failed" {
			t.Fatalf("a store without the cache did not see another process's write: %+v", sn)
		}
		if plain.ConfigLoads() != 0 {
			t.Fatal("a store whose cache was never enabled loaded the configuration")
		}
		must(t, cached.Fresh().SetSnapshotState(ctx, "snap-1", "Ready", "", ""))
		if e, err := cached.GetEnvironment(ctx, envs[0]); err != nil || cached.ConfigLoads() != 2 {
			t.Fatalf("after a write through Fresh: %+v, %v, %d loads; want a second load", e, err, cached.ConfigLoads())
		}
	})
}

// Concurrent reads that find no valid copy wait for one load.
func TestConfigCacheLoadsOnceUnderConcurrentReads(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		envs, _, _, _ := seedPlane(t, st, "alice", 8)
		st.EnableConfigCache()
		ctx := context.Background()
		var wg sync.WaitGroup
		for i := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := st.GetEnvironment(ctx, envs[i%len(envs)]); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if n := st.ConfigLoads(); n != 1 {
			t.Fatalf("32 concurrent reads ran %d loads; want 1", n)
		}
	})
}

// A load is one consistent read. Another process keeps replacing an environment, with
// its secret and its snapshot, in single transactions; every load must hold either the
// old set or the new one: an environment whose secret or snapshot is missing (or a
// secret whose environment is) would mean the tables were read at different moments.
func TestConfigCacheLoadIsOneConsistentRead(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		seedPlane(t, st, "alice", 0)
		ctx := context.Background()
		writer := reopen(t, st)
		replace := func(i int) error {
			name, snap := fmt.Sprintf("rot-%d", i), fmt.Sprintf("snap-rot-%d", i)
			return writer.inTx(ctx, func(tx *txn) error {
				now := writer.stamp()
				if _, err := tx.ExecContext(ctx, `DELETE FROM secrets WHERE environment LIKE 'rot-%'`); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `DELETE FROM environments WHERE name LIKE 'rot-%'`); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `DELETE FROM snapshots WHERE id LIKE 'snap-rot-%'`); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO snapshots(id, provider, build_hash, base, spec, status, builds, created_at, updated_at)
					VALUES (?, 'local', 'h', '', '{}', 'Ready', 1, ?, ?)`, snap, now, now); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO environments(id, name, provider, owner, reserved, image, build_script, cpu, memory, disk, triggers, env, block_all, allow_domains, build_hash, snapshot_id, created_at, updated_at)
					VALUES (?, ?, 'local', 'alice', 0, 'platform', '', 1, 1, 3, '{}', '{}', 0, '[]', 'h', ?, ?, ?)`, name, name, snap, now, now); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, `INSERT INTO secrets(id, environment, env_name, hosts, value_enc, version, created_at, updated_at)
					VALUES (?, ?, 'TOKEN', '[]', ?, 1, ?, ?)`, SecretID(name, "TOKEN"), name, []byte("v"), now, now)
				return err
			})
		}
		must(t, replace(0))
		done := make(chan struct{})
		var werr error
		go func() {
			defer close(done)
			for i := 1; i <= 150; i++ {
				if werr = replace(i); werr != nil {
					return
				}
			}
		}()
		loads := 0
		for running := true; running; loads++ {
			select {
			case <-done:
				running = false
			default:
			}
			c := reopen(t, st)
			c.EnableConfigCache()
			snap := c.config(ctx)
			c.Close()
			if snap == nil {
				t.Fatal("the load failed")
			}
			envOf := map[string]bool{}
			for _, e := range snap.envs {
				envOf[e.Name] = true
				if _, ok := snap.snapshots[e.SnapshotID]; !ok {
					t.Fatalf("load %d: environment %s references snapshot %s, which the load does not hold", loads, e.Name, e.SnapshotID)
				}
				if _, ok := snap.secretByID[SecretID(e.Name, "TOKEN")]; !ok && strings.HasPrefix(e.Name, "rot-") {
					t.Fatalf("load %d: environment %s without its secret", loads, e.Name)
				}
			}
			for _, s := range snap.secrets {
				if !envOf[s.Environment] {
					t.Fatalf("load %d: secret %s without its environment", loads, s.ID)
				}
			}
		}
		if werr != nil {
			t.Fatal(werr)
		}
		t.Logf("%d loads during 150 replacements", loads)
	})
}

// Row-level security: a role's cached reads are exactly its uncached ones. Bob, a team
// role, sees no secret of alice's environment; the harness role sees them all; alice
// sees hers. What one role loaded never reaches another's store.
func TestConfigCacheKeepsRowLevelSecurity(t *testing.T) {
	p := newRLSPlane(t)
	ctx := context.Background()
	must(t, p.asBob.CreateEnvironment(ctx, Environment{ID: "e2", Name: "bobs", Provider: "local", Owner: p.bob, Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h1", SnapshotID: "snap-1"}))
	must(t, p.asBob.CreateSecret(ctx, Secret{ID: SecretID("bobs", "BOB_TOKEN"), Environment: "bobs", EnvName: "BOB_TOKEN", ValueEnc: []byte("bobs-sealed")}))
	envs := []string{"py", "bobs"}
	secrets := []string{SecretID("py", "TOKEN"), SecretID("bobs", "BOB_TOKEN")}
	agents := []string{"helper"}
	for _, role := range []struct {
		name    string
		visible []string // secrets the role must see
	}{{p.alice, secrets[:1]}, {p.bob, secrets[1:]}, {p.harness, secrets}} {
		url := p.c.URL(p.db, role.name)
		want := planReads(t, openAt(t, url), envs, secrets, agents, []string{"snap-1"})
		cached := openAt(t, url)
		cached.EnableConfigCache()
		got := planReads(t, cached, envs, secrets, agents, []string{"snap-1"})
		if d := firstDiff(want, got); d != "" {
			t.Errorf("%s: a cached read differs from the uncached one:\n%s", role.name, d)
		}
		if cached.ConfigLoads() != 1 {
			t.Errorf("%s: %d loads; want 1 (a load refused for the role falls back to the database)", role.name, cached.ConfigLoads())
		}
		var seen []string
		for _, id := range secrets {
			if _, err := cached.GetSecret(ctx, id); err == nil {
				seen = append(seen, id)
			} else if !errors.Is(err, ErrNotFound) {
				t.Errorf("%s: secret %s: %v", role.name, id, err)
			}
		}
		if !reflect.DeepEqual(seen, role.visible) {
			t.Errorf("%s sees secrets %v through the cache; want %v", role.name, seen, role.visible)
		}
	}
}

// Only the Terraform provider turns the cache on: the harness, the builds coordinator
// and the backends must see other processes' writes, so nothing else in the module may
// call EnableConfigCache (tests aside).
func TestConfigCacheEnabledOnlyByTheProvider(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var callers []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".tmp" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "EnableConfigCache" {
				rel, _ := filepath.Rel(root, path)
				callers = append(callers, filepath.Dir(rel))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range callers {
		if dir != "internal/provider" {
			t.Errorf("%s turns the config cache on; only internal/provider (a plan) may", dir)
		}
	}
}
