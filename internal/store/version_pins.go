package store

import (
	"slices"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
)

// migrationVersionPins (24): a version an agent pins is kept. An agent's
// sandbox.environment_version (agent_environment_version.go in the provider) names a
// version of its environment by snapshot id or build hash; collection must leave that
// snapshot alone for as long as the pin stands, or the agent's next session finds it
// gone. The pin lives in the spec's JSON; environment_version is it as a column, which
// CreateAgent and UpdateAgent write from the spec (agentPin), so that the one rule of
// what is kept (keptSnapshotIDs) is a plain join on both databases. Written before, a
// spec's pin is copied by this migration. Every team reads every agent row, so another
// team's pin on a shared environment keeps its version too: the environment's owner
// cannot collect a snapshot another team's agent runs on.
//
// Who writes: apply (the agents table's policies: each team its own agents).
var migrationVersionPins = migration{sql: `
ALTER TABLE agents ADD COLUMN environment_version TEXT NOT NULL DEFAULT '';
UPDATE agents SET environment_version = COALESCE(json_extract(spec, '$.sandbox.environment_version'), '')
	WHERE environment IS NOT NULL AND json_valid(spec);
CREATE INDEX agents_environment_version ON agents(environment, environment_version);
`, postgres: `
ALTER TABLE agents ADD COLUMN environment_version TEXT NOT NULL DEFAULT '';
UPDATE agents SET environment_version = COALESCE(spec::jsonb #>> '{sandbox,environment_version}', '')
	WHERE environment IS NOT NULL AND spec LIKE '%"environment_version"%';
CREATE INDEX agents_environment_version ON agents(environment, environment_version);
`}

// pinMatches is the condition that agent row a pins the version of history row h: it
// runs on h's environment and its pin is h's snapshot id or build hash (what the
// harness's FindVersion resolves the pin by).
const pinMatches = `a.environment = h.environment AND a.environment_version <> '' AND a.environment_version IN (h.snapshot_id, h.build_hash)`

// keptSnapshotIDs are the snapshots garbage collection leaves alone as versions: the
// ones an environment keeps (kept: its current one and its keep_versions latest
// previous ones, recordHistory) and the ones an agent pins. UnreferencedSnapshots and
// MarkSnapshotCollecting both exclude them.
const keptSnapshotIDs = `SELECT h.snapshot_id FROM environment_snapshots h
	WHERE h.kept = 1 OR EXISTS (SELECT 1 FROM agents a WHERE ` + pinMatches + `)`

// pinnedByColumn is, for history row h, the names of the agents that pin it, separated
// by commas ("" for none): agent names are validated names, without commas.
func pinnedByColumn(d dialect) string {
	if d == postgres {
		return `COALESCE((SELECT string_agg(a.name, ',' ORDER BY a.name) FROM agents a WHERE ` + pinMatches + `), '')`
	}
	return `COALESCE((SELECT group_concat(a.name, ',') FROM agents a WHERE ` + pinMatches + `), '')`
}

// splitPinnedBy reads pinnedByColumn, sorted.
func splitPinnedBy(s string) []string {
	if s == "" {
		return nil
	}
	names := strings.Split(s, ",")
	slices.Sort(names)
	return names
}

// agentPin is the version of its environment that agent spec pins
// (sandbox.environment_version), "" when it pins none or its sandbox is off (then it
// references no environment, and the harness pins nothing).
func agentPin(spec []byte) string {
	s, err := agentspec.Decode(spec)
	if err != nil || s.EnvironmentRef() == "" {
		return ""
	}
	return s.Sandbox.EnvironmentVersion
}

// VersionsPastKeep lists the versions of versions (as EnvironmentVersions lists them)
// that agents pin (PinnedBy) but that keep_versions alone would no longer keep once
// next is the environment's current snapshot ("" or an id not in versions: a new one)
// and keep is its keep_versions: the ones that only their pins keep from collection.
// A plan names them, so that whoever moves the environment on knows their snapshots
// stay, and why.
func VersionsPastKeep(versions []EnvironmentVersion, next string, keep int64) []EnvironmentVersion {
	periods := make([]period, 0, len(versions)+1)
	for i := len(versions) - 1; i >= 0; i-- {
		periods = append(periods, period{snapshot: versions[i].SnapshotID, at: versions[i].CurrentSince.UnixMilli()})
	}
	if next == "" {
		next = "\x00new" // no snapshot id: one the history has not seen
	}
	periods = append(periods, period{snapshot: next})
	kept := keptSnapshots(periods, keep)
	var out []EnvironmentVersion
	for _, v := range versions {
		if len(v.PinnedBy) > 0 && !slices.Contains(kept, v.SnapshotID) {
			out = append(out, v)
		}
	}
	return out
}
