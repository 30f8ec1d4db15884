package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// migration is one step of the schema's history, the same history on both databases.
// Its SQL is written for SQLite; PostgreSQL runs the same text with its own names for
// what differs (pgTypes), or postgres when a step needs other statements there. A step
// one database does not need is an empty string for it, and is still recorded, so
// that a version number means one schema everywhere.
type migration struct {
	sql      string
	postgres string
}

// text is the migration's SQL for d.
func (m migration) text(d dialect) string {
	if d != postgres {
		return m.sql
	}
	if m.postgres != "" {
		return m.postgres
	}
	return pgTypes(m.sql)
}

// pgTypes renames SQLite's column types that PostgreSQL spells otherwise.
func pgTypes(sql string) string {
	return strings.ReplaceAll(sql, " BLOB", " BYTEA")
}

// onlyPostgres marks a step that SQLite records without running.
const onlyPostgres = "-- nothing to do on SQLite"

// migrations are applied in order, each once, recorded in schema_migrations. Never edit
// a released migration: append a new one.
var migrations = []migration{
	// 1: the published configuration.
	{sql: `
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
`},
	// 2: the harness's runtime state. Sessions own an append-only event log, runs (one
	// per user message, with a heartbeat so a killed harness is noticed), at most one
	// sandbox record (a reattachable pointer, never the source of truth), artifacts
	// offered for download, and the full text of tool outputs cut for the model.
	{sql: `
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
`},
	// 3: what the harness must keep to recreate a local sandbox's egress proxy (after a
	// stop, an archive or its own restart): the network policy read when the sandbox was
	// created, and the proxy's state (its CA key and the placeholders in the sandbox's
	// environment), sealed with the secret box.
	{sql: `
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
`},
	// 4: at most one running run per session, in the database itself, so two harness
	// processes cannot both start one (a check-then-insert raced). Runs left running in
	// the same session by that race are ended first, keeping one.
	{sql: `
UPDATE session_runs SET status = 'interrupted', detail = 'another run of the session was running at the same time', ended_at = heartbeat_at
	WHERE status = 'running' AND id NOT IN (SELECT MAX(id) FROM session_runs WHERE status = 'running' GROUP BY session_id);
CREATE UNIQUE INDEX session_runs_one_running ON session_runs(session_id) WHERE status = 'running';
`},
	// 5: the local backend's require_limits. NULL (unset, and every provider saved
	// before) leaves the choice to each process: required when it runs as root.
	{sql: `
ALTER TABLE sandbox_providers ADD COLUMN require_limits BIGINT;
`},
	// 6: an agent whose sandbox is off references no environment (NULL), so it needs no
	// sandbox provider and never keeps an environment from being deleted. SQLite cannot
	// drop a NOT NULL constraint, so the table is rebuilt; agents saved before with the
	// sandbox off lose the reference their spec never used.
	{sql: `
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
`, postgres: `
-- No PostgreSQL control plane predates this migration, so no row needs rewriting.
ALTER TABLE agents ALTER COLUMN environment DROP NOT NULL;
`},
	// 7: what a control plane shared between machines needs: its settings (the secret
	// key's check value, the plane's id), the machine that holds each snapshot a backend
	// keeps in local files, and leases, by which one harness replica at a time acts on
	// something (the reaper on a sandbox).
	{sql: `
CREATE TABLE control_plane (
	name  TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
ALTER TABLE snapshots ADD COLUMN host TEXT NOT NULL DEFAULT '';
CREATE TABLE leases (
	name       TEXT PRIMARY KEY,
	holder     TEXT NOT NULL,
	expires_at BIGINT NOT NULL
);
`},
	// 8: ownership in the database itself (PostgreSQL; an SQLite file has one operator).
	// Every role that plans reads the published configuration, but writes only its own
	// rows: the owner column is the role that wrote the row (current_user), and a
	// secret belongs to its environment's owner. Secrets are read only by that owner and
	// by harness roles (members of trueforge_harness), which run the agents. Snapshots
	// and their history are shared: identical build inputs build once, for every team.
	// Which tables each kind of role may touch at all is granted by roles.go.
	{sql: onlyPostgres, postgres: `
ALTER TABLE owners ENABLE ROW LEVEL SECURITY;
CREATE POLICY owners_read ON owners FOR SELECT USING (true);
CREATE POLICY owners_insert ON owners FOR INSERT WITH CHECK (name = current_user);

` + ownedRows("sandbox_providers") + "\n" + ownedRows("environments") + "\n" + ownedRows("agents") + `
ALTER TABLE secrets ENABLE ROW LEVEL SECURITY;
CREATE POLICY secrets_read ON secrets FOR SELECT USING (
	` + secretsOwned + `
	OR EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = 'trueforge_harness' AND pg_has_role(current_user, r.oid, 'MEMBER')));
` + writesWhere("secrets", secretsOwned)},
	// 9: skills, published by apply (skill_blobs.go). A skill's content is stored once
	// per digest, the SHA-256 of its canonical encoding, and shared like snapshots:
	// identical folders in two agents, or two teams' agents, are one row. agent_skills
	// says which agent's spec references which blob; its foreign key keeps a referenced
	// blob from being deleted (garbage collection removes the others when an agent
	// drops them), and it goes with its agent. On PostgreSQL the content must hash to
	// its digest, so nobody can store other content under a digest (teams may insert and
	// delete blobs, never update them: roles.go), and only an agent's owner writes its
	// references.
	{sql: `
CREATE TABLE skill_blobs (
	digest     TEXT PRIMARY KEY,
	content    BLOB NOT NULL,
	size       BIGINT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE TABLE agent_skills (
	agent  TEXT NOT NULL REFERENCES agents(name) ON DELETE CASCADE,
	digest TEXT NOT NULL REFERENCES skill_blobs(digest) ON DELETE RESTRICT,
	PRIMARY KEY (agent, digest)
);
CREATE INDEX agent_skills_digest ON agent_skills(digest);
`, postgres: `
CREATE TABLE skill_blobs (
	digest     TEXT PRIMARY KEY,
	content    BYTEA NOT NULL,
	size       BIGINT NOT NULL,
	created_at BIGINT NOT NULL,
	CHECK (digest = 'sha256:' || encode(sha256(content), 'hex') AND size = octet_length(content))
);
CREATE TABLE agent_skills (
	agent  TEXT NOT NULL REFERENCES agents(name) ON DELETE CASCADE,
	digest TEXT NOT NULL REFERENCES skill_blobs(digest) ON DELETE RESTRICT,
	PRIMARY KEY (agent, digest)
);
CREATE INDEX agent_skills_digest ON agent_skills(digest);
ALTER TABLE agent_skills ENABLE ROW LEVEL SECURITY;
CREATE POLICY agent_skills_read ON agent_skills FOR SELECT USING (true);
CREATE POLICY agent_skills_insert ON agent_skills FOR INSERT WITH CHECK (
	EXISTS (SELECT 1 FROM agents a WHERE a.name = agent_skills.agent AND a.owner = current_user));
CREATE POLICY agent_skills_delete ON agent_skills FOR DELETE USING (
	EXISTS (SELECT 1 FROM agents a WHERE a.name = agent_skills.agent AND a.owner = current_user));
`},
	// 10: the harness as a service (users.go, package api). API users with a hashed
	// token (the token itself is never stored), the web page's logins (cookie sessions,
	// stored hashed so every replica accepts them), the admin audit log, a session's
	// one-off environment (NULL: the agent's), and a cancel asked of a run that another
	// replica runs (its heartbeat sees it). The users are the harness's, like sessions:
	// on PostgreSQL the harness group reads and writes them and teams get nothing
	// (roles.go).
	{sql: `
CREATE TABLE users (
	name             TEXT PRIMARY KEY,
	admin            BIGINT NOT NULL DEFAULT 0,
	token_hash       TEXT NOT NULL UNIQUE,
	created_at       BIGINT NOT NULL,
	token_rotated_at BIGINT NOT NULL
);
CREATE TABLE user_logins (
	id_hash      TEXT PRIMARY KEY,
	user_name    TEXT NOT NULL REFERENCES users(name) ON DELETE CASCADE,
	created_at   BIGINT NOT NULL,
	expires_at   BIGINT NOT NULL,
	last_seen_at BIGINT NOT NULL
);
CREATE INDEX user_logins_user ON user_logins(user_name);
CREATE TABLE admin_audit (
	seq    BIGINT PRIMARY KEY,
	at     BIGINT NOT NULL,
	actor  TEXT NOT NULL,
	action TEXT NOT NULL,
	target TEXT NOT NULL,
	detail TEXT NOT NULL DEFAULT ''
);
ALTER TABLE sessions ADD COLUMN environment TEXT;
CREATE INDEX sessions_owner ON sessions(owner, created_at);
ALTER TABLE session_runs ADD COLUMN cancel_requested BIGINT NOT NULL DEFAULT 0;
`},
	// From 11 on, each step lives in the file of the feature it serves.
	migrationEnvironmentSettings, // 11: environment_settings.go
	migrationVolumesRegistries,   // 12: volumes.go
	migrationSupplyChain,         // 13: snapshot_manifests.go
	migrationSharing,             // 14: sharing.go
	migrationVolumeSize,          // 15: volume_size.go
	migrationPackageIndexOwners,  // 16: package_index_owners.go
	migrationGovernance,          // 17: approvals.go (approvals, budget counters)
	migrationScanVerdicts,        // 18: scan_verdicts.go
	migrationAttachments,         // 19: attachments.go
	migrationProvenance,          // 20: provenance.go (extracted archives' provenance)
	migrationRecipients,          // 21: recipients.go (downloads by classification)
	migrationEnvironmentVersions, // 22: environment_versions.go (kept versions of environments)
	migrationWarmPools,           // 23: warm_pools.go (warm pools' members)
	migrationVersionPins,         // 24: version_pins.go (versions agents pin are kept)
	migrationPoolEgress,          // 25: warm_pools.go (a pool member's prepared egress)
	migrationSessionVisibility,   // 26: session_visibility.go (teams read their agents' sessions)
	migrationUsageIndex,          // 27: usage.go (events by kind and time, for usage over a window)
}

// secretsOwned is the condition of migration 8's policies on secrets: the secret's
// environment is the role's.
const secretsOwned = `EXISTS (SELECT 1 FROM environments e WHERE e.name = secrets.environment AND e.owner = current_user)`

// migrationLock is the PostgreSQL advisory lock that migrations take, so that two
// processes opening an old database at once migrate it once (SQLite's BEGIN IMMEDIATE
// serializes them the same way). Its value is arbitrary and fixed: "tfschema" in ASCII.
const migrationLock = 0x7466736368656d61

// migrate brings the schema to the latest version. A database at the latest version
// costs one query. One newer than this binary knows is refused, naming both versions.
// Each pending migration runs in its own transaction, under the migration lock, after
// checking again that nobody applied it meanwhile.
func (s *Store) migrate(ctx context.Context) error {
	cur, applied, err := s.schemaState(ctx)
	if err != nil {
		return fmt.Errorf("reading the schema version of the control-plane database: %w", err)
	}
	if cur > len(migrations) {
		return fmt.Errorf("the control-plane database's schema is at version %d, newer than this release of trueforge knows (version %d): "+
			"another machine upgraded it; upgrade this provider or harness to the same release", cur, len(migrations))
	}
	if cur == len(migrations) && applied == cur {
		return nil
	}
	for i, m := range migrations {
		version := i + 1
		if err := s.applyMigration(ctx, version, m.text(s.db.dialect)); err != nil {
			if isPermission(err) {
				return fmt.Errorf("the control-plane database's schema is at version %d and this release needs version %d, but role %q may not change the schema (%w). "+
					"Have the database's owner run `trueforge-harness db migrate` with this release, or connect once as a role that may create tables in the database",
					cur, len(migrations), s.role, err)
			}
			return fmt.Errorf("applying migration %d to the %s control-plane database%s: %w", version, s.db.dialect, s.where(), err)
		}
	}
	if err := s.regrant(ctx); err != nil {
		return fmt.Errorf("granting the trueforge roles the migrated tables: %w", err)
	}
	return nil
}

// applyMigration applies one migration unless it is recorded already. It runs at READ
// COMMITTED on PostgreSQL, not in inTx's SERIALIZABLE: the version is read after the
// lock is granted, so it must see what the lock's previous holder committed.
func (s *Store) applyMigration(ctx context.Context, version int, text string) error {
	s.db.count()
	sqlTx, err := s.db.sql.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	tx := &txn{tx: sqlTx, d: s.db}
	defer func() { _ = sqlTx.Rollback() }() // after a commit, only sql.ErrTxDone
	if s.db.dialect == postgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, int64(migrationLock)); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return err
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if text != onlyPostgres {
		if _, err := tx.ExecContext(ctx, text); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(version, applied_at) VALUES (?, ?)`, version, s.stamp()); err != nil {
		return err
	}
	s.db.count()
	return sqlTx.Commit()
}

// where names the SQLite file, for errors; a PostgreSQL URL is not repeated (it may hold
// a password).
func (s *Store) where() string {
	if s.path != "" {
		return " " + s.path
	}
	return ""
}

// SchemaVersion is the latest applied migration (0 for an empty database).
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	v, _, err := s.schemaState(ctx)
	return v, err
}

// schemaState reads the latest applied migration and how many are applied (fewer than
// the latest only when one was taken back by hand, which migrate then applies again).
func (s *Store) schemaState(ctx context.Context) (latest, applied int, err error) {
	var v sql.NullInt64
	err = s.db.QueryRowContext(ctx, `SELECT MAX(version), COUNT(*) FROM schema_migrations`).Scan(&v, &applied)
	if isUndefinedTable(err) {
		return 0, 0, nil
	}
	return int(v.Int64), applied, err
}

// LatestSchemaVersion is the schema version this release migrates to.
func LatestSchemaVersion() int { return len(migrations) }
