package store

import "context"

// Sessions and their sandboxes, as each role sees them (PostgreSQL; an SQLite file has
// one operator, who sees them all). A team reads, never writes, the sessions of the
// agents it owns (agents.owner = current_user) and the sandbox records of the sessions
// it sees: the trueforge_sessions and trueforge_sandboxes data sources answer a team role
// with its own. Nothing else of the harness's is visible to teams (runtimeTables).
//
// Enabling row-level security on these tables binds the harness too, so the harness
// group gets a permissive policy of its own that sees and writes every row: what the
// harness does is unchanged. Its condition names the group through pg_roles, as
// migration 8's secrets_read does, because the group roles may not exist yet when the
// schema is migrated (roles.go creates them). A table's owner is not bound by row-level
// security, so the migrating role is unchanged as well.
//
// The team's policies are for SELECT only, and teams are granted only SELECT on these
// tables (sessionTables, roles.go): without a policy for INSERT, UPDATE or DELETE, and
// without the privilege, a team role can change none of them.
const harnessMember = `EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = 'trueforge_harness' AND pg_has_role(current_user, r.oid, 'MEMBER'))`

var migrationSessionVisibility = migration{sql: onlyPostgres, postgres: `
ALTER TABLE sessions ENABLE ROW LEVEL SECURITY;
CREATE POLICY sessions_harness ON sessions FOR ALL USING (` + harnessMember + `) WITH CHECK (` + harnessMember + `);
CREATE POLICY sessions_team_read ON sessions FOR SELECT USING (
	EXISTS (SELECT 1 FROM agents a WHERE a.name = sessions.agent AND a.owner = current_user));
ALTER TABLE session_sandboxes ENABLE ROW LEVEL SECURITY;
CREATE POLICY session_sandboxes_harness ON session_sandboxes FOR ALL USING (` + harnessMember + `) WITH CHECK (` + harnessMember + `);
CREATE POLICY session_sandboxes_team_read ON session_sandboxes FOR SELECT USING (
	EXISTS (SELECT 1 FROM sessions s WHERE s.id = session_sandboxes.session_id));
`}

// RunsSessions reports whether this store's role may run sessions: create them and
// change their sandboxes' state, which the trueforge_sandboxes_stop and
// trueforge_agent_check actions do. On SQLite it always may; on PostgreSQL a harness
// role (or the tables' owner) may, and a team role, which only reads its agents'
// sessions, may not.
func (s *Store) RunsSessions(ctx context.Context) (bool, error) {
	if s.db.dialect != postgres {
		return true, nil
	}
	var ok bool
	err := s.db.QueryRowContext(ctx, `SELECT has_table_privilege(current_user, 'sessions', 'INSERT')
		AND has_table_privilege(current_user, 'session_sandboxes', 'UPDATE')`).Scan(&ok)
	return ok, err
}
