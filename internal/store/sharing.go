package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// ShareAll in a shared_with list shares an object with every owner of the control plane.
const ShareAll = "*"

// UsableBy is the one rule of who may use an owner's shareable object (an environment
// with secrets, a volume): its owner, and the owners its shared_with list names ("*":
// everyone). Names are compared exactly, as PostgreSQL compares role names. The
// provider's plan checks, the harness's run-time checks and the store's SQL policies
// (migration 14's trueforge_usable_by) all decide by this rule.
func UsableBy(owner string, sharedWith []string, who string) bool {
	return who == owner || slices.Contains(sharedWith, ShareAll) || slices.Contains(sharedWith, who)
}

// UsableBy reports whether the agents of owner who may run on the environment. One
// without secrets is a blueprint anyone may build sandboxes from (its env, network and
// build inputs are readable by every team anyway); one with secrets lends its owner's
// authority to whoever runs on it, so it needs the owner's consent (store.UsableBy on
// its owner and SharedWith). The reserved default environment follows the same rule:
// its secrets serve the sandbox provider's owner alone, since it has no shared_with.
// The harness decides by this at run time, whatever the rows say, so a secret added, or
// a name unshared, after another owner's agent selected the environment still never
// reaches that agent.
func (e Environment) UsableBy(who string) bool {
	return !e.HasSecrets || UsableBy(e.Owner, e.SharedWith, who)
}

// migrationSharing (14): who may use an environment that has secrets (issue 23). An
// environment gains shared_with, a JSON array of owner names or "*" (default: nobody
// but its owner). environments_with_secrets names the environments that have any
// secret: a view, so that on PostgreSQL it reads secrets with its owner's (the tables'
// owner's) rights, and every team can tell which environments it may not use without
// reading another team's secrets; only names leave it, never a variable name or a
// value.
//
// On PostgreSQL trueforge_usable_by is store.UsableBy in SQL, and the agents policies
// refuse a team's INSERT or UPDATE of an agent that references an environment with
// secrets its owner may not use (trueforge_environment_usable), so psql cannot do what
// the provider refuses. Adding a secret to, or unsharing, an environment that other
// owners' agents already use is not refused: consent is the owner's to withdraw, and
// the harness refuses those agents at run time (Environment.UsableBy). SQLite has one
// operator, who owns the file and could drop any trigger, so there the provider and
// the harness enforce the rule.
var migrationSharing = migration{sql: `
ALTER TABLE environments ADD COLUMN shared_with TEXT NOT NULL DEFAULT '[]';
CREATE VIEW environments_with_secrets AS SELECT DISTINCT environment FROM secrets;
`, postgres: `
ALTER TABLE environments ADD COLUMN shared_with TEXT NOT NULL DEFAULT '[]'
	CHECK (jsonb_typeof(shared_with::jsonb) = 'array');
CREATE VIEW environments_with_secrets AS SELECT DISTINCT environment FROM secrets;

-- store.UsableBy: shared_with is a JSON array of owner names, or "*" for everyone.
CREATE FUNCTION trueforge_usable_by(owner TEXT, shared_with TEXT, who TEXT) RETURNS BOOLEAN
	LANGUAGE sql IMMUTABLE AS $$
	SELECT COALESCE($3 = $1, false)
		OR COALESCE($2::jsonb @> '["*"]'::jsonb OR $2::jsonb @> jsonb_build_array($3), false)
$$;

-- Environment.UsableBy: no environment, one without secrets, or one whose owner lets who
-- use it. The search path is the one the tables were created in, whatever the caller's.
-- The body names its arguments by position: a column (environments.env) would win over
-- an argument's name.
CREATE FUNCTION trueforge_environment_usable(environment_name TEXT, who TEXT) RETURNS BOOLEAN
	LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
	SELECT $1 IS NULL
		OR NOT EXISTS (SELECT 1 FROM environments_with_secrets s WHERE s.environment = $1)
		OR EXISTS (SELECT 1 FROM environments e WHERE e.name = $1 AND trueforge_usable_by(e.owner, e.shared_with, $2))
$$;

DROP POLICY agents_insert ON agents;
CREATE POLICY agents_insert ON agents FOR INSERT
	WITH CHECK (owner = current_user AND trueforge_environment_usable(environment, owner));
DROP POLICY agents_update ON agents;
CREATE POLICY agents_update ON agents FOR UPDATE USING (owner = current_user)
	WITH CHECK (owner = current_user AND trueforge_environment_usable(environment, owner));
`}

// UnusableVolume returns the first volume env mounts that who may not use, and whether
// there is one. An environment lends its volumes as well as its secrets: one without
// secrets may serve another owner's agents, but its volumes serve only the owners their
// owner shares them with (the harness refuses the sandbox then, whatever the rows say).
// A volume gone since the environment was applied is not this check's to report.
func (s *Store) UnusableVolume(ctx context.Context, env Environment, who string) (Volume, bool, error) {
	for _, v := range env.Settings.Volumes {
		vol, err := s.GetVolume(ctx, v.Volume)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return Volume{}, false, fmt.Errorf("environment %q, volume %q: %w", env.Name, v.Volume, err)
		}
		if !vol.UsableBy(who) {
			return vol, true, nil
		}
	}
	return Volume{}, false, nil
}

// SecretsConsent is what decides whether an environment's secrets may serve a session's
// sandbox: the owner of the session's agent, and the environment's owner and
// shared_with (store.UsableBy).
type SecretsConsent struct {
	Agent, AgentOwner string
	EnvOwner          string
	SharedWith        []string
}

// Allowed reports whether the agent's owner may use the environment's secrets.
func (c SecretsConsent) Allowed() bool { return UsableBy(c.EnvOwner, c.SharedWith, c.AgentOwner) }

// SessionSecrets reads environment's secrets with the SecretsConsent of session
// sessionID's sandbox made from it, in one statement: the egress proxy asks it before
// each request that may carry a secret, so an unshared environment stops lending them at
// the next one, for the cost of the one read it made before consent was checked. A
// session, agent or environment that does not exist is ErrNotFound: no owner, no consent.
func (s *Store) SessionSecrets(ctx context.Context, sessionID, environment string) ([]Secret, SecretsConsent, error) {
	var c SecretsConsent
	rows, err := s.db.QueryContext(ctx, `SELECT a.name, a.owner, e.owner, e.shared_with,
		sec.id, sec.environment, sec.env_name, sec.hosts, sec.value_enc, sec.version
		FROM sessions s JOIN agents a ON a.name = s.agent JOIN environments e ON e.name = ?
		LEFT JOIN secrets sec ON sec.environment = e.name
		WHERE s.id = ? ORDER BY sec.env_name`, environment, sessionID)
	if err != nil {
		return nil, c, fmt.Errorf("reading environment %q's secrets for session %q: %w", environment, sessionID, err)
	}
	defer rows.Close()
	var out []Secret
	found := false
	for rows.Next() {
		found = true
		var shared string
		var id, env, name, hosts sql.NullString
		var value []byte
		var version sql.NullInt64
		if err := rows.Scan(&c.Agent, &c.AgentOwner, &c.EnvOwner, &shared, &id, &env, &name, &hosts, &value, &version); err != nil {
			return nil, c, fmt.Errorf("reading environment %q's secrets for session %q: %w", environment, sessionID, err)
		}
		c.SharedWith = decodeSharedWith(shared)
		if !id.Valid {
			continue // the environment has none: the LEFT JOIN's one empty row
		}
		sec := Secret{ID: id.String, Environment: env.String, EnvName: name.String, ValueEnc: value, Version: version.Int64}
		_ = json.Unmarshal([]byte(hosts.String), &sec.Hosts)
		out = append(out, sec)
	}
	if err := rows.Err(); err != nil {
		return nil, c, fmt.Errorf("reading environment %q's secrets for session %q: %w", environment, sessionID, err)
	}
	if !found {
		return nil, c, fmt.Errorf("session %q, its agent or environment %q: %w", sessionID, environment, ErrNotFound)
	}
	return out, c, nil
}
