package store

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// PostgreSQL roles of a shared control plane. Each person or CI pipeline that applies
// configuration logs in as its own role, a member of TeamGroup; each harness logs in as
// a member of HarnessGroup. The groups carry the table privileges (below); row-level
// security (migration 8; session_visibility.go for sessions) keeps a team to its own rows. The tables belong to the role
// that migrated them (the database's owner), which is neither: a table's owner is not
// bound by row-level security, so it must not be used to apply or run agents.
const (
	TeamGroup    = "trueforge_team"
	HarnessGroup = "trueforge_harness"
)

// RoleKind says what a login role does: apply configuration, or run agents.
type RoleKind string

const (
	TeamRole    RoleKind = "team"
	HarnessRole RoleKind = "harness"
)

// The tables by what reads and writes them. A table added by a migration joins one of
// these lists, and the owner's next migrate grants it (grantsSQL runs after migrations).
var (
	// configTables are what `terraform apply` publishes: teams read all of them and
	// write their own rows; harnesses read them.
	configTables = []string{"owners", "sandbox_providers", "snapshots", "environments", "environment_snapshots", "secrets", "agents", "counters",
		"volumes", "registries"}
	// runtimeTables are the harness's: sessions and what hangs off them, the API's
	// users, their logins and the admin audit log, and the approvals and budget
	// counters of the harness's calls, the malware scanner's verdicts on downloads,
	// where extracted archives came from (extractions), admins' releases of offered
	// files (artifact_releases) and warm pools' members (pool_sandboxes). Teams have no access at all.
	runtimeTables = []string{"session_events", "session_runs", "artifacts", "tool_outputs", "sandbox_egress", "leases",
		"users", "user_logins", "admin_audit", "approvals", "budget_usage", "scan_verdicts", "extractions", "attachments", "attachment_blobs",
		"artifact_releases", "pool_sandboxes"}
	// sessionTables are the harness's too, and it alone writes them, but teams read them
	// under row-level security (session_visibility.go): a team sees the sessions of its
	// own agents and their sandbox records, for the trueforge_sessions and
	// trueforge_sandboxes data sources. SELECT only: a team never changes them.
	sessionTables = []string{"sessions", "session_sandboxes"}
	// sharedTables are read and written by both kinds: the plane's settings (the
	// secret key's check value is stored by whoever seals first).
	sharedTables = []string{"control_plane"}
	// contentTables are content-addressed rows that apply writes and harnesses read:
	// skills' content and which agent references it. Teams insert and delete (the
	// foreign key keeps referenced content, row-level security others' references)
	// but never update: content stays what its digest says.
	contentTables = []string{"skill_blobs", "agent_skills"}
	// views are read by both kinds and written by neither: environments_with_secrets
	// (sharing.go) names the environments that have secrets, for every team.
	views = []string{"environments_with_secrets"}
)

// grantsSQL grants the group roles what their kind needs on the tables of schema. It
// creates the groups when they are missing, so it needs a role that may create roles
// the first time (after that, only the tables' owner).
func grantsSQL(schema string) string {
	q := quoteIdent(schema)
	var b strings.Builder
	fmt.Fprintf(&b, "DO $$ BEGIN\n")
	for _, g := range []string{TeamGroup, HarnessGroup} {
		fmt.Fprintf(&b, "\tIF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%s') THEN CREATE ROLE %s NOLOGIN; END IF;\n", g, g)
	}
	fmt.Fprintf(&b, "END $$;\n")
	fmt.Fprintf(&b, "GRANT USAGE ON SCHEMA %s TO %s, %s;\n", q, TeamGroup, HarnessGroup)
	fmt.Fprintf(&b, "GRANT SELECT ON %s.schema_migrations TO %s, %s;\n", q, TeamGroup, HarnessGroup)
	fmt.Fprintf(&b, "GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %s;\n", tableList(q, configTables), TeamGroup)
	fmt.Fprintf(&b, "GRANT SELECT ON %s TO %s;\n", tableList(q, configTables), HarnessGroup)
	fmt.Fprintf(&b, "GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %s;\n", tableList(q, runtimeTables), HarnessGroup)
	fmt.Fprintf(&b, "GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %s;\n", tableList(q, sessionTables), HarnessGroup)
	fmt.Fprintf(&b, "GRANT SELECT ON %s TO %s;\n", tableList(q, sessionTables), TeamGroup)
	fmt.Fprintf(&b, "GRANT SELECT, INSERT ON %s TO %s, %s;\n", tableList(q, sharedTables), TeamGroup, HarnessGroup)
	fmt.Fprintf(&b, "GRANT SELECT, INSERT, DELETE ON %s TO %s;\n", tableList(q, contentTables), TeamGroup)
	fmt.Fprintf(&b, "GRANT SELECT ON %s TO %s;\n", tableList(q, contentTables), HarnessGroup)
	fmt.Fprintf(&b, "GRANT SELECT ON %s TO %s, %s;\n", tableList(q, views), TeamGroup, HarnessGroup)
	return b.String()
}

func tableList(schema string, tables []string) string {
	out := make([]string, len(tables))
	for i, t := range tables {
		out[i] = schema + "." + t
	}
	return strings.Join(out, ", ")
}

// roleName is what a login role may be called here: a plain lower-case identifier, so
// that it needs no quoting and reads the same in SQL, in owner columns and in errors.
var roleName = lazyRegexp(`^[a-z_][a-z0-9_]{0,62}$`)

// RolesSQL is the SQL that sets up login role name as kind on the control plane in
// schema: the group roles and their grants (as grantsSQL), then the login role (created
// without a password when missing) as a member of its group. Run it as the database's
// owner with a role that may create roles (CREATEROLE).
func RolesSQL(schema string, kind RoleKind, name string) (string, error) {
	if !roleName().MatchString(name) {
		return "", fmt.Errorf("role name %q: use lower-case letters, digits and _ (at most 63), starting with a letter or _", name)
	}
	group := TeamGroup
	switch kind {
	case TeamRole:
	case HarnessRole:
		group = HarnessGroup
	default:
		return "", fmt.Errorf("role kind %q: use %q or %q", kind, TeamRole, HarnessRole)
	}
	if name == TeamGroup || name == HarnessGroup {
		return "", fmt.Errorf("role name %q is one of trueforge's group roles; name the login role after the team or harness", name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- trueforge control plane: %s role %s (schema %s, version %d)\n", kind, name, schema, len(migrations))
	b.WriteString(grantsSQL(schema))
	fmt.Fprintf(&b, "DO $$ BEGIN\n\tIF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%s') THEN CREATE ROLE %s LOGIN; END IF;\nEND $$;\n", name, name)
	fmt.Fprintf(&b, "GRANT %s TO %s;\n", group, name)
	fmt.Fprintf(&b, "-- Give %s a credential as your server authenticates (for example ALTER ROLE %s PASSWORD '...').\n", name, name)
	return b.String(), nil
}

// Schema is the PostgreSQL schema that holds the control plane's tables ("" on SQLite).
func (s *Store) Schema(ctx context.Context) (string, error) {
	if s.db.dialect != postgres {
		return "", nil
	}
	var schema string
	err := s.db.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema)
	return schema, err
}

// ApplyRoles runs RolesSQL on the database, as the role this store connects as.
func (s *Store) ApplyRoles(ctx context.Context, kind RoleKind, name string) error {
	if s.db.dialect != postgres {
		return fmt.Errorf("roles exist only on PostgreSQL; this control plane is an SQLite file, where the owner is what each caller names")
	}
	schema, err := s.Schema(ctx)
	if err != nil {
		return err
	}
	q, err := RolesSQL(schema, kind, name)
	if err != nil {
		return err
	}
	if err := s.lockedDDL(ctx, q); err != nil {
		return fmt.Errorf("setting up %s role %s as %s: %w", kind, name, s.role, err)
	}
	return nil
}

// regrant refreshes the group roles' privileges after migrations, when the groups exist:
// a table a migration added is granted like the others. The migrating role is the
// tables' owner, so it may grant on them.
func (s *Store) regrant(ctx context.Context) error {
	if s.db.dialect != postgres {
		return nil
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_roles WHERE rolname IN (?, ?)`, TeamGroup, HarnessGroup).Scan(&n); err != nil {
		return err
	}
	if n < 2 {
		return nil
	}
	schema, err := s.Schema(ctx)
	if err != nil {
		return err
	}
	return s.lockedDDL(ctx, grantsSQL(schema))
}

// lockedDDL runs statements that change the schema's objects or privileges under the
// migration lock: PostgreSQL refuses two concurrent GRANTs on one table ("tuple
// concurrently updated"), which processes opening a database at once would otherwise
// send.
func (s *Store) lockedDDL(ctx context.Context, statements string) error {
	s.db.queries.Add(1)
	sqlTx, err := s.db.sql.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = sqlTx.Rollback() }() // after a commit, only sql.ErrTxDone
	tx := &txn{tx: sqlTx, d: s.db}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, int64(migrationLock)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, statements); err != nil {
		return err
	}
	s.db.queries.Add(1)
	return sqlTx.Commit()
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// lazyRegexp returns a function that compiles expr the first time it is called, so that
// starting a program that links this package does not compile it (the local sandbox's
// init is such a program, started for each sandbox).
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
