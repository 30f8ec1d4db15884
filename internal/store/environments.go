package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Environment is a blueprint for sandboxes.
type Environment struct {
	ID           string
	Name         string
	Provider     string
	Owner        string
	Reserved     bool // the provider's `default` environment
	Image        string
	BuildScript  string
	CPU          int64
	MemoryGB     int64
	DiskGB       int64
	Triggers     map[string]string
	Env          map[string]string
	BlockAll     bool
	AllowDomains []string
	BuildHash    string
	SnapshotID   string
	// Settings are the attributes added after the first release (environment_settings.go).
	Settings EnvironmentSettings
	// SharedWith names the owners, besides Owner, whose agents may use the environment's
	// secrets ("*": every owner); UsableBy (sharing.go) decides.
	SharedWith []string
	// HasSecrets reports whether the environment has any secret, read through
	// environments_with_secrets so that a team that may not read another team's secrets
	// still knows (sharing.go); writes ignore it.
	HasSecrets bool
}

const envSelect = `SELECT e.id, e.name, e.provider, e.owner, e.reserved, e.image, e.build_script, e.cpu, e.memory, e.disk,
	e.triggers, e.env, e.block_all, e.allow_domains, e.build_hash, e.snapshot_id, e.settings, e.shared_with,
	CASE WHEN EXISTS (SELECT 1 FROM environments_with_secrets x WHERE x.environment = e.name) THEN 1 ELSE 0 END FROM environments e`

func scanEnv(sc scanner) (Environment, error) {
	var e Environment
	var reserved, blockAll, hasSecrets int64
	var triggers, env, allow, settings, sharedWith string
	err := sc.Scan(&e.ID, &e.Name, &e.Provider, &e.Owner, &reserved, &e.Image, &e.BuildScript, &e.CPU, &e.MemoryGB, &e.DiskGB,
		&triggers, &env, &blockAll, &allow, &e.BuildHash, &e.SnapshotID, &settings, &sharedWith, &hasSecrets)
	if err != nil {
		return e, err
	}
	e.Reserved, e.BlockAll, e.HasSecrets = reserved != 0, blockAll != 0, hasSecrets != 0
	_ = json.Unmarshal([]byte(sharedWith), &e.SharedWith)
	_ = json.Unmarshal([]byte(triggers), &e.Triggers)
	_ = json.Unmarshal([]byte(env), &e.Env)
	_ = json.Unmarshal([]byte(allow), &e.AllowDomains)
	_ = json.Unmarshal([]byte(settings), &e.Settings)
	return e, nil
}

func envArgs(e Environment) (triggers, env, allow, settings, sharedWith string) {
	t, _ := json.Marshal(nonNilMap(e.Triggers))
	v, _ := json.Marshal(nonNilMap(e.Env))
	a, _ := json.Marshal(nonNil(e.AllowDomains))
	st, _ := json.Marshal(e.Settings)
	sw, _ := json.Marshal(nonNil(e.SharedWith))
	return string(t), string(v), string(a), string(st), string(sw)
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// CreateEnvironment stores a new environment. Its snapshot row must exist (ClaimSnapshot)
// and not be collected meanwhile (ErrSnapshotCollected: claim it again).
func (s *Store) CreateEnvironment(ctx context.Context, e Environment) error {
	return s.createAs(ctx, e.Owner, func(tx *txn, now int64) error {
		if err := snapshotUsable(ctx, tx, e.SnapshotID); err != nil {
			return fmt.Errorf("environment %q: %w", e.Name, err)
		}
		t, v, a, st, sw := envArgs(e)
		_, err := tx.ExecContext(ctx, `INSERT INTO environments(id, name, provider, owner, reserved, image, build_script, cpu, memory, disk, triggers, env, block_all, allow_domains, build_hash, snapshot_id, settings, shared_with, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.ID, e.Name, e.Provider, e.Owner, b2i(e.Reserved), e.Image, e.BuildScript, e.CPU, e.MemoryGB, e.DiskGB, t, v, b2i(e.BlockAll), a, e.BuildHash, e.SnapshotID, st, sw, now, now)
		missing := notFound("environment %q: sandbox provider %q or snapshot %s", e.Name, e.Provider, e.SnapshotID)
		if err := inserted(err, missing, "environment %q", e.Name); err != nil {
			return err
		}
		return recordHistory(ctx, tx, e.Name, e.SnapshotID, e.BuildHash, e.Settings.Keep(), now) // environment_versions.go
	})
}

// UpdateEnvironment replaces every mutable field of environment e.Name. Its snapshot must
// not be collected meanwhile (ErrSnapshotCollected: claim it again).
func (s *Store) UpdateEnvironment(ctx context.Context, e Environment) error {
	return s.inTx(ctx, func(tx *txn) error {
		now := s.stamp()
		if err := snapshotUsable(ctx, tx, e.SnapshotID); err != nil {
			return fmt.Errorf("environment %q: %w", e.Name, err)
		}
		t, v, a, st, sw := envArgs(e)
		res, err := tx.ExecContext(ctx, `UPDATE environments SET image = ?, build_script = ?, cpu = ?, memory = ?, disk = ?, triggers = ?, env = ?, block_all = ?, allow_domains = ?, build_hash = ?, snapshot_id = ?, settings = ?, shared_with = ?, updated_at = ? WHERE name = ?`,
			e.Image, e.BuildScript, e.CPU, e.MemoryGB, e.DiskGB, t, v, b2i(e.BlockAll), a, e.BuildHash, e.SnapshotID, st, sw, now, e.Name)
		if err := changedOne(res, err, "updating", "environment %q", e.Name); err != nil {
			return err
		}
		return recordHistory(ctx, tx, e.Name, e.SnapshotID, e.BuildHash, e.Settings.Keep(), now) // environment_versions.go
	})
}

// GetEnvironment reads an environment by name.
func (s *Store) GetEnvironment(ctx context.Context, name string) (Environment, error) {
	return getRow(ctx, s, (*configSnapshot).environment, scanEnv, envSelect+` WHERE e.name = ?`, name, "environment %q")
}

// ListEnvironments returns all environments ordered by name.
func (s *Store) ListEnvironments(ctx context.Context) ([]Environment, error) {
	if c := s.config(ctx); c != nil {
		return c.environments(), nil
	}
	return listEnvironments(ctx, s.db)
}

func listEnvironments(ctx context.Context, q querier) ([]Environment, error) {
	envs, err := queryRows(ctx, q, scanEnv, envSelect+` ORDER BY e.name`)
	if err != nil {
		return nil, fmt.Errorf("listing environments: %w", err)
	}
	return envs, nil
}

// SnapshotHistory lists the snapshots an environment has pointed at, oldest first.
func (s *Store) SnapshotHistory(ctx context.Context, env string) ([]string, error) {
	return queryRows(ctx, s.db, scanString, `SELECT snapshot_id FROM environment_snapshots WHERE environment = ? ORDER BY created_at`, env)
}

// AgentsUsing lists the agents that reference an environment.
func (s *Store) AgentsUsing(ctx context.Context, env string) ([]string, error) {
	if c := s.config(ctx); c != nil {
		return c.agentsUsing(env), nil
	}
	return agentsUsing(ctx, s.db, env)
}

// agentsUsing lists the agents that reference environment env, by name.
func agentsUsing(ctx context.Context, q querier, env string) ([]string, error) {
	return queryRows(ctx, q, scanString, `SELECT name FROM agents WHERE environment = ? ORDER BY name`, env)
}

// DeleteEnvironment removes an environment and its secrets. It fails with ErrInUse,
// naming the agents, while saved agents reference it; the foreign key enforces the same
// rule for any other writer of the database.
func (s *Store) DeleteEnvironment(ctx context.Context, name string) error {
	return s.inTx(ctx, func(tx *txn) error {
		agents, err := agentsUsing(ctx, tx, name)
		if err != nil {
			return err
		}
		if len(agents) > 0 {
			return fmt.Errorf("environment %q is referenced by agent(s) %s: %w", name, strings.Join(agents, ", "), ErrInUse)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM environments WHERE name = ?`, name)
		if isForeignKey(err) {
			return fmt.Errorf("environment %q is referenced by an agent: %w", name, ErrInUse)
		}
		if err := changedOne(res, err, "deleting", "environment %q", name); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM environment_snapshots WHERE environment = ?`, name)
		return err
	})
}
