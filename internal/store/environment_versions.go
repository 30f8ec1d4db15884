package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// migrationEnvironmentVersions (22): versions of an environment (issue 28). Every
// snapshot an environment has pointed at is one of its versions; environment_snapshots
// already records when each became current (a row per period). The history gains the
// build hash and the manifest digest, so that a version still says what it was once its
// snapshot is collected, and kept: whether the snapshot is the environment's current one
// or one of its keep_versions latest previous ones. Garbage collection leaves a kept
// snapshot alone, so that reverting to it (or pinning an agent to it) needs no build.
// kept is recomputed for the whole environment in the transaction that moves it
// (recordHistory), which also reads keep_versions from its settings document.
//
// Who writes: apply (a configuration table, shared like snapshots).
var migrationEnvironmentVersions = migration{sql: `
ALTER TABLE environment_snapshots ADD COLUMN build_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE environment_snapshots ADD COLUMN manifest_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE environment_snapshots ADD COLUMN kept BIGINT NOT NULL DEFAULT 0;
CREATE INDEX environment_snapshots_kept ON environment_snapshots(snapshot_id, kept);
`}

// DefaultKeepVersions is how many previous versions an environment keeps from
// collection when its configuration does not say.
const DefaultKeepVersions = 3

// MaxKeepVersions bounds keep_versions: each kept version holds a snapshot's disk.
const MaxKeepVersions = 32

// Keep is how many previous versions the environment keeps (its setting, else
// DefaultKeepVersions).
func (st EnvironmentSettings) Keep() int64 {
	if st.KeepVersions == nil {
		return DefaultKeepVersions
	}
	return *st.KeepVersions
}

// EnvironmentVersion is one snapshot an environment has used.
type EnvironmentVersion struct {
	SnapshotID     string
	BuildHash      string
	ManifestDigest string
	// CurrentSince is when it last became the environment's snapshot; CurrentUntil when
	// another replaced it then (zero while it is current).
	CurrentSince time.Time
	CurrentUntil time.Time
	// Current: new sessions use it; Kept: it is current, one of the keep_versions
	// latest previous versions, or pinned by an agent (PinnedBy), so it is not
	// collected and may be pinned or reverted to.
	Current bool
	Kept    bool
	// PinnedBy names the agents, of any owner, whose sandbox.environment_version pins
	// this version (version_pins.go), sorted; they keep it whatever keep_versions says.
	PinnedBy []string
}

// recordHistory makes snapshot the environment's current version (a new period unless
// it is already), fills what the history lacks (build hashes, manifest digests taken
// since) and recomputes which versions are kept, keeping keep previous ones.
func recordHistory(ctx context.Context, tx *txn, env, snapshot, buildHash string, keep, now int64) error {
	periods, err := queryRows(ctx, tx, scanPeriod, `SELECT snapshot_id, created_at FROM environment_snapshots WHERE environment = ? ORDER BY created_at`, env)
	if err != nil {
		return fmt.Errorf("reading the versions of environment %q: %w", env, err)
	}
	if n := len(periods); n > 0 && now <= periods[n-1].at {
		// Two moves within one millisecond (or a clock behind the last one): the
		// history's order is its times', so the new period starts after the last.
		now = periods[n-1].at + 1
	}
	if len(periods) == 0 || periods[len(periods)-1].snapshot != snapshot {
		if _, err := tx.ExecContext(ctx, `INSERT INTO environment_snapshots(environment, snapshot_id, created_at, build_hash) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			env, snapshot, now, buildHash); err != nil {
			return fmt.Errorf("recording version %s of environment %q: %w", snapshot, env, err)
		}
		periods = append(periods, period{snapshot: snapshot, at: now})
	}
	if _, err := tx.ExecContext(ctx, `UPDATE environment_snapshots SET
		build_hash = COALESCE((SELECT s.build_hash FROM snapshots s WHERE s.id = environment_snapshots.snapshot_id), build_hash),
		manifest_digest = COALESCE((SELECT m.digest FROM snapshot_manifests m WHERE m.snapshot_id = environment_snapshots.snapshot_id), manifest_digest)
		WHERE environment = ? AND (build_hash = '' OR manifest_digest = '')`, env); err != nil {
		return fmt.Errorf("completing the versions of environment %q: %w", env, err)
	}
	kept := keptSnapshots(periods, keep)
	args := make([]any, 0, len(kept)+1)
	for _, id := range kept {
		args = append(args, id)
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(kept)), ", ")
	if _, err := tx.ExecContext(ctx, `UPDATE environment_snapshots SET kept = CASE WHEN snapshot_id IN (`+marks+`) THEN 1 ELSE 0 END WHERE environment = ?`,
		append(args, env)...); err != nil {
		return fmt.Errorf("marking the kept versions of environment %q: %w", env, err)
	}
	return nil
}

// period is one row of the history: a snapshot and when it became current.
type period struct {
	snapshot string
	at       int64
}

func scanPeriod(sc scanner) (period, error) {
	var p period
	err := sc.Scan(&p.snapshot, &p.at)
	return p, err
}

// keptSnapshots are the current snapshot (the last period's) and the keep latest other
// snapshots, by when each last became current.
func keptSnapshots(periods []period, keep int64) []string {
	var kept []string
	seen := map[string]bool{}
	for i := len(periods) - 1; i >= 0 && int64(len(kept)) <= keep; i-- {
		if id := periods[i].snapshot; !seen[id] {
			seen[id] = true
			kept = append(kept, id)
		}
	}
	return kept
}

// versionRow is one period of an environment's history as versions are read: the
// snapshot's build hash and manifest digest from its rows while it exists, else as the
// history recorded them.
type versionRow struct {
	environment string
	period
	buildHash, digest string
	kept              bool     // by keep_versions (the kept column)
	pinnedBy          []string // agents that pin it (version_pins.go)
}

func versionSelect(d dialect) string {
	return `SELECT h.environment, h.snapshot_id, h.created_at, COALESCE(s.build_hash, h.build_hash), COALESCE(m.digest, h.manifest_digest), h.kept, ` + pinnedByColumn(d) + `
	FROM environment_snapshots h
	LEFT JOIN snapshots s ON s.id = h.snapshot_id
	LEFT JOIN snapshot_manifests m ON m.snapshot_id = h.snapshot_id`
}

func scanVersionRow(sc scanner) (versionRow, error) {
	var r versionRow
	var kept int64
	var pinnedBy string
	err := sc.Scan(&r.environment, &r.snapshot, &r.at, &r.buildHash, &r.digest, &kept, &pinnedBy)
	r.kept, r.pinnedBy = kept != 0, splitPinnedBy(pinnedBy)
	return r, err
}

// EnvironmentVersions lists the versions of environment env, the current one first,
// then the others by when they last became current, latest first. A snapshot current
// in several periods (reverted to) is one version, dated by its latest period. A plan
// reads them from the config cache (one query for every environment).
func (s *Store) EnvironmentVersions(ctx context.Context, env string) ([]EnvironmentVersion, error) {
	if c := s.config(ctx); c != nil {
		return versionsOf(c.versions[env]), nil
	}
	rows, err := queryRows(ctx, s.db, scanVersionRow, versionSelect(s.db.dialect)+` WHERE h.environment = ? ORDER BY h.created_at`, env)
	if err != nil {
		return nil, fmt.Errorf("listing the versions of environment %q: %w", env, err)
	}
	return versionsOf(rows), nil
}

// versionsOf turns one environment's history, oldest period first, into its versions.
func versionsOf(rows []versionRow) []EnvironmentVersion {
	var out []EnvironmentVersion
	seen := map[string]bool{}
	for i := len(rows) - 1; i >= 0; i-- {
		r := rows[i]
		if seen[r.snapshot] {
			continue
		}
		seen[r.snapshot] = true
		v := EnvironmentVersion{SnapshotID: r.snapshot, BuildHash: r.buildHash, ManifestDigest: r.digest,
			CurrentSince: time.UnixMilli(r.at), Current: i == len(rows)-1, Kept: r.kept || i == len(rows)-1 || len(r.pinnedBy) > 0, PinnedBy: r.pinnedBy}
		if i+1 < len(rows) {
			v.CurrentUntil = time.UnixMilli(rows[i+1].at)
		}
		out = append(out, v)
	}
	return out
}

// The config cache reads each environment's history in the statement that reads the
// environments, as one JSON array per environment row (as config_cache_children.go does
// for a provider's volumes), so that versions cost a plan no statement of their own.
func versionsColumn(d dialect) string {
	if d == postgres {
		return `COALESCE((SELECT json_agg(json_build_array(h.snapshot_id, h.created_at, COALESCE(s.build_hash, h.build_hash), COALESCE(m.digest, h.manifest_digest), h.kept, ` + pinnedByColumn(d) + `) ORDER BY h.created_at)
		FROM environment_snapshots h LEFT JOIN snapshots s ON s.id = h.snapshot_id LEFT JOIN snapshot_manifests m ON m.snapshot_id = h.snapshot_id
		WHERE h.environment = e.name), '[]')::text`
	}
	return `(SELECT json_group_array(json_array(h.snapshot_id, h.created_at, COALESCE(s.build_hash, h.build_hash), COALESCE(m.digest, h.manifest_digest), h.kept, ` + pinnedByColumn(d) + `))
		FROM (SELECT * FROM environment_snapshots WHERE environment = e.name ORDER BY created_at) h
		LEFT JOIN snapshots s ON s.id = h.snapshot_id LEFT JOIN snapshot_manifests m ON m.snapshot_id = h.snapshot_id)`
}

// selectEnvironmentsWithVersions is listEnvironments with each environment's history,
// for the config cache.
func selectEnvironmentsWithVersions(ctx context.Context, q querier, d dialect) ([]Environment, map[string][]versionRow, error) {
	query := strings.TrimSuffix(envSelect, " FROM environments e") + ",\n\t" + versionsColumn(d) + " FROM environments e ORDER BY e.name"
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the configuration: %w", err)
	}
	defer rows.Close()
	var envs []Environment
	versions := map[string][]versionRow{}
	for rows.Next() {
		var doc string
		var sc scanFunc = func(dest ...any) error { return rows.Scan(append(dest, &doc)...) }
		e, err := scanEnv(sc)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the configuration: %w", err)
		}
		envs = append(envs, e)
		hist, err := childRows(doc, 6, "versions", e.Name)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range hist {
			at, _ := r[1].(float64)
			kept, _ := r[4].(float64)
			versions[e.Name] = append(versions[e.Name], versionRow{environment: e.Name, period: period{snapshot: str(r[0]), at: int64(at)},
				buildHash: str(r[2]), digest: str(r[3]), kept: kept != 0, pinnedBy: splitPinnedBy(str(r[5]))})
		}
		// The JSON keeps the subquery's order on both databases; sorted anyway, since
		// versionsOf reads the history by time.
		slices.SortStableFunc(versions[e.Name], func(a, b versionRow) int { return cmp.Compare(a.at, b.at) })
	}
	return envs, versions, rows.Err()
}

// FindVersion returns the version of environment env whose snapshot id or build hash is
// ref (ErrNotFound when it has none).
func (s *Store) FindVersion(ctx context.Context, env, ref string) (EnvironmentVersion, error) {
	versions, err := s.EnvironmentVersions(ctx, env)
	if err != nil {
		return EnvironmentVersion{}, err
	}
	for _, v := range versions {
		if ref != "" && (v.SnapshotID == ref || v.BuildHash == ref) {
			return v, nil
		}
	}
	return EnvironmentVersion{}, notFound("version %q of environment %q", ref, env)
}
