package store

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations are applied in order, each once, recorded in schema_migrations. Never edit
// a released migration: append a new one.
var migrations = []string{
	// 1: the published configuration.
	`
CREATE TABLE owners (
	name       TEXT PRIMARY KEY,
	created_at BIGINT NOT NULL
);
CREATE TABLE sandbox_providers (
	name             TEXT PRIMARY KEY,
	type             TEXT NOT NULL,
	api_url          TEXT NOT NULL DEFAULT '',
	target           TEXT NOT NULL DEFAULT '',
	api_key_enc      BLOB,
	scopes           TEXT NOT NULL DEFAULT '[]',
	release_snapshot TEXT NOT NULL DEFAULT '',
	status           TEXT NOT NULL,
	owner            TEXT NOT NULL REFERENCES owners(name),
	created_at       BIGINT NOT NULL,
	updated_at       BIGINT NOT NULL
);
CREATE TABLE snapshots (
	id          TEXT PRIMARY KEY,
	provider    TEXT NOT NULL REFERENCES sandbox_providers(name) ON DELETE CASCADE,
	build_hash  TEXT NOT NULL,
	base        TEXT NOT NULL DEFAULT '',
	spec        TEXT NOT NULL,
	status      TEXT NOT NULL,
	reason      TEXT NOT NULL DEFAULT '',
	log_tail    TEXT NOT NULL DEFAULT '',
	builds      BIGINT NOT NULL DEFAULT 0,
	created_at  BIGINT NOT NULL,
	updated_at  BIGINT NOT NULL
);
CREATE TABLE environments (
	name          TEXT PRIMARY KEY,
	id            TEXT NOT NULL UNIQUE,
	provider      TEXT NOT NULL REFERENCES sandbox_providers(name),
	owner         TEXT NOT NULL REFERENCES owners(name),
	reserved      BIGINT NOT NULL DEFAULT 0,
	image         TEXT NOT NULL,
	build_script  TEXT NOT NULL DEFAULT '',
	cpu           BIGINT NOT NULL,
	memory        BIGINT NOT NULL,
	disk          BIGINT NOT NULL,
	triggers      TEXT NOT NULL DEFAULT '{}',
	env           TEXT NOT NULL DEFAULT '{}',
	block_all     BIGINT NOT NULL DEFAULT 0,
	allow_domains TEXT NOT NULL DEFAULT '[]',
	build_hash    TEXT NOT NULL,
	snapshot_id   TEXT NOT NULL REFERENCES snapshots(id),
	created_at    BIGINT NOT NULL,
	updated_at    BIGINT NOT NULL
);
-- Every snapshot an environment has pointed at, newest last: the history the harness
-- uses to say which snapshot an existing sandbox came from.
CREATE TABLE environment_snapshots (
	environment TEXT NOT NULL,
	snapshot_id TEXT NOT NULL,
	created_at  BIGINT NOT NULL,
	PRIMARY KEY (environment, snapshot_id, created_at)
);
CREATE TABLE secrets (
	id          TEXT PRIMARY KEY,
	environment TEXT NOT NULL REFERENCES environments(name) ON DELETE CASCADE,
	env_name    TEXT NOT NULL,
	hosts       TEXT NOT NULL DEFAULT '[]',
	value_enc   BLOB NOT NULL,
	version     BIGINT NOT NULL DEFAULT 1,
	created_at  BIGINT NOT NULL,
	updated_at  BIGINT NOT NULL,
	UNIQUE (environment, env_name)
);
CREATE TABLE agents (
	name        TEXT PRIMARY KEY,
	id          TEXT NOT NULL UNIQUE,
	owner       TEXT NOT NULL REFERENCES owners(name),
	-- RESTRICT: an environment referenced by a saved agent cannot be deleted.
	environment TEXT NOT NULL REFERENCES environments(name) ON DELETE RESTRICT ON UPDATE RESTRICT,
	spec        TEXT NOT NULL,
	created_at  BIGINT NOT NULL,
	updated_at  BIGINT NOT NULL
);
CREATE INDEX agents_environment ON agents(environment);
-- Monotonic counters (builds started, ...) that survive garbage collection of the rows
-- they count.
CREATE TABLE counters (
	name  TEXT PRIMARY KEY,
	value BIGINT NOT NULL
);
CREATE INDEX environments_snapshot ON environments(snapshot_id);
`,
	// 2: the harness's runtime state. Sessions own an append-only event log, runs (one
	// per user message, with a heartbeat so a killed harness is noticed), at most one
	// sandbox record (a reattachable pointer, never the source of truth), artifacts
	// offered for download, and the full text of tool outputs cut for the model.
	`
CREATE TABLE sessions (
	id            TEXT PRIMARY KEY,
	agent         TEXT NOT NULL,
	owner         TEXT NOT NULL,
	replay        BIGINT NOT NULL DEFAULT 0,
	input_tokens  BIGINT NOT NULL DEFAULT 0,
	output_tokens BIGINT NOT NULL DEFAULT 0,
	created_at    BIGINT NOT NULL,
	updated_at    BIGINT NOT NULL
);
CREATE INDEX sessions_agent ON sessions(agent);
CREATE TABLE session_events (
	session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	seq        BIGINT NOT NULL,
	run_id     TEXT NOT NULL DEFAULT '',
	kind       TEXT NOT NULL,
	payload    TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (session_id, seq)
);
CREATE TABLE session_runs (
	id           TEXT PRIMARY KEY,
	session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	status       TEXT NOT NULL,
	owner        TEXT NOT NULL,
	heartbeat_at BIGINT NOT NULL,
	started_at   BIGINT NOT NULL,
	ended_at     BIGINT NOT NULL DEFAULT 0,
	detail       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX session_runs_session ON session_runs(session_id, status);
CREATE TABLE session_sandboxes (
	session_id    TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
	provider      TEXT NOT NULL,
	provider_type TEXT NOT NULL,
	sandbox_id    TEXT NOT NULL,
	environment   TEXT NOT NULL,
	snapshot_id   TEXT NOT NULL,
	state         TEXT NOT NULL,
	generation    BIGINT NOT NULL DEFAULT 1,
	active_execs  BIGINT NOT NULL DEFAULT 0,
	exec_owner    TEXT NOT NULL DEFAULT '',
	uncertain     TEXT NOT NULL DEFAULT '[]',
	created_at    BIGINT NOT NULL,
	last_used_at  BIGINT NOT NULL,
	state_at      BIGINT NOT NULL
);
CREATE TABLE artifacts (
	id             TEXT PRIMARY KEY,
	session_id     TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	path           TEXT NOT NULL,
	sha256         TEXT NOT NULL,
	size           BIGINT NOT NULL,
	source_event   BIGINT NOT NULL,
	classification TEXT NOT NULL,
	expires_at     BIGINT NOT NULL,
	snapshot_id    TEXT NOT NULL,
	sandbox_id     TEXT NOT NULL,
	commands       TEXT NOT NULL DEFAULT '[]',
	content        BLOB NOT NULL,
	created_at     BIGINT NOT NULL
);
CREATE INDEX artifacts_session ON artifacts(session_id, path);
CREATE TABLE tool_outputs (
	session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	call_id    TEXT NOT NULL,
	content    BLOB NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (session_id, call_id)
);
`,
	// 3: what the harness must keep to recreate a local sandbox's egress proxy (after a
	// stop, an archive or its own restart): the network policy read when the sandbox was
	// created, and the proxy's state (its CA key and the placeholders in the sandbox's
	// environment), sealed with the secret box.
	`
CREATE TABLE sandbox_egress (
	sandbox_id    TEXT PRIMARY KEY,
	session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	environment   TEXT NOT NULL,
	block_all     BIGINT NOT NULL DEFAULT 0,
	allow_domains TEXT NOT NULL DEFAULT '[]',
	state_enc     BLOB NOT NULL,
	created_at    BIGINT NOT NULL
);
CREATE INDEX sandbox_egress_session ON sandbox_egress(session_id);
`,
	// 4: at most one running run per session, in the database itself, so two harness
	// processes cannot both start one (a check-then-insert raced). Runs left running in
	// the same session by that race are ended first, keeping one.
	`
UPDATE session_runs SET status = 'interrupted', detail = 'another run of the session was running at the same time', ended_at = heartbeat_at
	WHERE status = 'running' AND id NOT IN (SELECT MAX(id) FROM session_runs WHERE status = 'running' GROUP BY session_id);
CREATE UNIQUE INDEX session_runs_one_running ON session_runs(session_id) WHERE status = 'running';
`,
	// 5: the local backend's require_limits. NULL (unset, and every provider saved
	// before) leaves the choice to each process: required when it runs as root.
	`
ALTER TABLE sandbox_providers ADD COLUMN require_limits BIGINT;
`,
	// 6: an agent whose sandbox is off references no environment (NULL), so it needs no
	// sandbox provider and never keeps an environment from being deleted. SQLite cannot
	// drop a NOT NULL constraint, so the table is rebuilt; agents saved before with the
	// sandbox off lose the reference their spec never used.
	`
CREATE TABLE agents_new (
	name        TEXT PRIMARY KEY,
	id          TEXT NOT NULL UNIQUE,
	owner       TEXT NOT NULL REFERENCES owners(name),
	-- RESTRICT: an environment referenced by a saved agent cannot be deleted.
	environment TEXT REFERENCES environments(name) ON DELETE RESTRICT ON UPDATE RESTRICT,
	spec        TEXT NOT NULL,
	created_at  BIGINT NOT NULL,
	updated_at  BIGINT NOT NULL
);
INSERT INTO agents_new(name, id, owner, environment, spec, created_at, updated_at)
	SELECT name, id, owner,
		CASE WHEN json_valid(spec) AND COALESCE(json_extract(spec, '$.sandbox.enabled'), 0) = 0 THEN NULL ELSE environment END,
		spec, created_at, updated_at
	FROM agents;
DROP TABLE agents;
ALTER TABLE agents_new RENAME TO agents;
CREATE INDEX agents_environment ON agents(environment);
`,
}

func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}
	for i, m := range migrations {
		version := i + 1
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(version, applied_at) VALUES (?, ?)`, version, s.stamp())
			return err
		})
		if err != nil {
			return fmt.Errorf("applying migration %d to %s: %w", version, s.path, err)
		}
	}
	return nil
}

// SchemaVersion is the latest applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v)
	return int(v.Int64), err
}
