package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/manifest"
)

// migrationSupplyChain (13): snapshot manifests and artifact lineage (issue 18).
//
// snapshot_manifests holds one manifest per snapshot (package manifest: what its
// package databases list), as its canonical JSON, with its digest and what taking it
// cost. snapshot_packages indexes the same packages by name, for the advisory query
// (AffectedBy): which snapshots hold a version of a package. Both go with their
// snapshot. They are shared like snapshots (identical build inputs build once, for every
// team): every role reads them, the roles that build write them (roles.go lists them
// with the snapshots). An artifact records the digest of its sandbox's snapshot manifest
// and the packages installed in the session before it was offered (a JSON list of
// manifest.Package).
var migrationSupplyChain = migration{sql: `
CREATE TABLE snapshot_manifests (
	snapshot_id TEXT PRIMARY KEY REFERENCES snapshots(id) ON DELETE CASCADE,
	digest      TEXT NOT NULL,
	content     TEXT NOT NULL,
	packages    BIGINT NOT NULL,
	bytes       BIGINT NOT NULL,
	omitted     BIGINT NOT NULL DEFAULT 0,
	extract_ms  BIGINT NOT NULL,
	created_at  BIGINT NOT NULL
);
CREATE TABLE snapshot_packages (
	snapshot_id TEXT NOT NULL REFERENCES snapshots(id) ON DELETE CASCADE,
	ecosystem   TEXT NOT NULL,
	name        TEXT NOT NULL,
	version     TEXT NOT NULL,
	PRIMARY KEY (snapshot_id, ecosystem, name, version)
);
CREATE INDEX snapshot_packages_name ON snapshot_packages(name, ecosystem);
ALTER TABLE artifacts ADD COLUMN manifest_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE artifacts ADD COLUMN session_installs TEXT NOT NULL DEFAULT '[]';
`}

// SnapshotManifest is a snapshot's stored manifest.
type SnapshotManifest struct {
	SnapshotID string
	Manifest   manifest.Manifest
	Digest     string
	Packages   int   // how many packages the manifest lists
	Bytes      int64 // size of its canonical JSON
	// Extract is how long taking the manifest took (reading the snapshot's databases).
	Extract   time.Duration
	CreatedAt time.Time
}

// packageRowsPerInsert bounds the rows of one INSERT into snapshot_packages (4
// parameters each, well inside SQLite's and PostgreSQL's limits).
const packageRowsPerInsert = 200

// PutSnapshotManifest stores (or replaces) the manifest of snapshot id and its package
// index, in one transaction.
func (s *Store) PutSnapshotManifest(ctx context.Context, id string, m manifest.Manifest, extract time.Duration) error {
	content := m.JSON()
	err := s.inTx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM snapshot_packages WHERE snapshot_id = ?`, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO snapshot_manifests(snapshot_id, digest, content, packages, bytes, omitted, extract_ms, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(snapshot_id) DO UPDATE SET digest = excluded.digest, content = excluded.content,
			packages = excluded.packages, bytes = excluded.bytes, omitted = excluded.omitted, extract_ms = excluded.extract_ms, created_at = excluded.created_at`,
			id, m.Digest(), string(content), len(m.Packages), len(content), m.Omitted, extract.Milliseconds(), s.stamp()); err != nil {
			return err
		}
		// The index holds each (ecosystem, name, version) once: architectures collapse.
		seen := map[[3]string]bool{}
		var rows [][3]string
		for _, p := range m.Packages {
			k := [3]string{p.Ecosystem, p.Name, p.Version}
			if !seen[k] {
				seen[k] = true
				rows = append(rows, k)
			}
		}
		for len(rows) > 0 {
			n := min(len(rows), packageRowsPerInsert)
			var q strings.Builder
			q.WriteString(`INSERT INTO snapshot_packages(snapshot_id, ecosystem, name, version) VALUES `)
			args := make([]any, 0, 4*n)
			for i, r := range rows[:n] {
				if i > 0 {
					q.WriteString(", ")
				}
				q.WriteString("(?, ?, ?, ?)")
				args = append(args, id, r[0], r[1], r[2])
			}
			if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
				return err
			}
			rows = rows[n:]
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storing the manifest of snapshot %s: %w", id, err)
	}
	return nil
}

// GetSnapshotManifest reads the manifest of snapshot id (ErrNotFound when none was taken).
func (s *Store) GetSnapshotManifest(ctx context.Context, id string) (SnapshotManifest, error) {
	sm := SnapshotManifest{SnapshotID: id}
	var content string
	var ms, created int64
	err := s.db.QueryRowContext(ctx, `SELECT digest, content, packages, bytes, extract_ms, created_at FROM snapshot_manifests WHERE snapshot_id = ?`, id).
		Scan(&sm.Digest, &content, &sm.Packages, &sm.Bytes, &ms, &created)
	if err != nil {
		return found(sm, err, "reading the", "manifest of snapshot %s", id)
	}
	if sm.Manifest, err = manifest.Parse([]byte(content)); err != nil {
		return sm, fmt.Errorf("reading the manifest of snapshot %s: %w", id, err)
	}
	sm.Extract, sm.CreatedAt = time.Duration(ms)*time.Millisecond, time.UnixMilli(created)
	return sm, nil
}

// HasSnapshotManifest reports whether a manifest of snapshot id is stored.
func (s *Store) HasSnapshotManifest(ctx context.Context, id string) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM snapshot_manifests WHERE snapshot_id = ?`, id).Scan(&n)
	return n > 0, err
}

// Affected is what an advisory query found: every snapshot holding a matching version,
// the environments that use or used them, and the sessions and artifacts whose lineage
// contains one (from their snapshot, or installed during the session).
type Affected struct {
	Query        string
	Snapshots    []AffectedSnapshot
	Environments []AffectedEnvironment
	Sessions     []AffectedSession
	Artifacts    []AffectedArtifact
}

// AffectedSnapshot is a snapshot holding matching packages.
type AffectedSnapshot struct {
	ID       string
	Packages []manifest.Package
}

// AffectedEnvironment is an environment whose snapshot (Current) or one of whose
// earlier snapshots holds a matching package.
type AffectedEnvironment struct {
	Name       string
	SnapshotID string
	Current    bool
}

// AffectedSession is a session whose sandbox came from an affected snapshot, or that
// installed a matching package itself (Via says which: "snapshot" or "session install").
type AffectedSession struct {
	ID         string
	Owner      string
	SnapshotID string
	Via        string
}

// AffectedArtifact is an artifact whose lineage holds a matching package.
type AffectedArtifact struct {
	ID, SessionID, Path, SHA256, SnapshotID string
	Owner                                   string // the session's owner
	Via                                     string // "snapshot" or "session install"
	Packages                                []manifest.Package
}

// snapshotsHolding finds the snapshots that hold a version of a package q matches, in
// snapshot order, with the matching packages of each. It reads the shared snapshot
// package index alone, which every role may read.
func (s *Store) snapshotsHolding(ctx context.Context, q manifest.Query) (map[string][]manifest.Package, []string, error) {
	names := []string{q.Name}
	if pn := manifest.PythonName(q.Name); pn != q.Name && (q.Ecosystem == "" || q.Ecosystem == manifest.PyPI) {
		names = append(names, pn)
	}
	query := `SELECT snapshot_id, ecosystem, name, version FROM snapshot_packages WHERE name IN (` + placeholders(len(names)) + `)`
	args := make([]any, 0, len(names)+1)
	for _, n := range names {
		args = append(args, n)
	}
	if q.Ecosystem != "" {
		query += ` AND ecosystem = ?`
		args = append(args, q.Ecosystem)
	}
	rows, err := s.db.QueryContext(ctx, query+` ORDER BY snapshot_id, ecosystem, name, version`, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("looking up %s in snapshot manifests: %w", q, err)
	}
	bySnap := map[string][]manifest.Package{}
	var snapIDs []string
	for rows.Next() {
		var id string
		var p manifest.Package
		if err := rows.Scan(&id, &p.Ecosystem, &p.Name, &p.Version); err != nil {
			rows.Close()
			return nil, nil, err
		}
		if !q.Matches(p) {
			continue
		}
		if _, ok := bySnap[id]; !ok {
			snapIDs = append(snapIDs, id)
		}
		bySnap[id] = append(bySnap[id], p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	return bySnap, snapIDs, nil
}

// SnapshotsAffectedBy lists the snapshots that hold a version of a package q matches:
// what AffectedBy finds first, without the sessions and artifacts (the harness's, which
// team roles may not read).
func (s *Store) SnapshotsAffectedBy(ctx context.Context, q manifest.Query) ([]string, error) {
	_, ids, err := s.snapshotsHolding(ctx, q)
	return ids, err
}

// AffectedBy answers an advisory query from the store alone: no backend is asked.
func (s *Store) AffectedBy(ctx context.Context, q manifest.Query) (Affected, error) {
	out := Affected{Query: q.String()}
	bySnap, snapIDs, err := s.snapshotsHolding(ctx, q)
	if err != nil {
		return out, err
	}
	for _, id := range snapIDs {
		out.Snapshots = append(out.Snapshots, AffectedSnapshot{ID: id, Packages: bySnap[id]})
	}
	sessions := map[string]AffectedSession{}
	if len(snapIDs) > 0 {
		in := placeholders(len(snapIDs))
		ids := make([]any, len(snapIDs))
		for i, id := range snapIDs {
			ids[i] = id
		}
		if err := s.affectedEnvironments(ctx, in, ids, &out); err != nil {
			return out, err
		}
		rows, err := s.db.QueryContext(ctx, `SELECT ss.session_id, s.owner, ss.snapshot_id FROM session_sandboxes ss JOIN sessions s ON s.id = ss.session_id
			WHERE ss.snapshot_id IN (`+in+`)`, ids...)
		if err != nil {
			return out, fmt.Errorf("looking up sessions of affected snapshots: %w", err)
		}
		for rows.Next() {
			var a AffectedSession
			if err := rows.Scan(&a.ID, &a.Owner, &a.SnapshotID); err != nil {
				rows.Close()
				return out, err
			}
			a.Via = "snapshot"
			sessions[a.ID] = a
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return out, err
		}
	}
	if err := s.affectedArtifacts(ctx, q, bySnap, sessions, &out); err != nil {
		return out, err
	}
	for _, a := range sessions {
		out.Sessions = append(out.Sessions, a)
	}
	sort.Slice(out.Sessions, func(i, j int) bool { return out.Sessions[i].ID < out.Sessions[j].ID })
	return out, nil
}

func (s *Store) affectedEnvironments(ctx context.Context, in string, ids []any, out *Affected) error {
	seen := map[[2]string]bool{}
	rows, err := s.db.QueryContext(ctx, `SELECT name, snapshot_id FROM environments WHERE snapshot_id IN (`+in+`) ORDER BY name`, ids...)
	if err != nil {
		return fmt.Errorf("looking up environments of affected snapshots: %w", err)
	}
	for rows.Next() {
		e := AffectedEnvironment{Current: true}
		if err := rows.Scan(&e.Name, &e.SnapshotID); err != nil {
			rows.Close()
			return err
		}
		seen[[2]string{e.Name, e.SnapshotID}] = true
		out.Environments = append(out.Environments, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = s.db.QueryContext(ctx, `SELECT DISTINCT environment, snapshot_id FROM environment_snapshots WHERE snapshot_id IN (`+in+`) ORDER BY environment, snapshot_id`, ids...)
	if err != nil {
		return fmt.Errorf("looking up environments of affected snapshots: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e AffectedEnvironment
		if err := rows.Scan(&e.Name, &e.SnapshotID); err != nil {
			return err
		}
		if !seen[[2]string{e.Name, e.SnapshotID}] {
			seen[[2]string{e.Name, e.SnapshotID}] = true
			out.Environments = append(out.Environments, e)
		}
	}
	return rows.Err()
}

// affectedArtifacts finds artifacts from an affected snapshot, and artifacts whose
// session installed a matching package (read from each artifact's session_installs).
func (s *Store) affectedArtifacts(ctx context.Context, q manifest.Query, bySnap map[string][]manifest.Package, sessions map[string]AffectedSession, out *Affected) error {
	rows, err := s.db.QueryContext(ctx, `SELECT a.id, a.session_id, a.path, a.sha256, a.snapshot_id, a.session_installs, s.owner
		FROM artifacts a JOIN sessions s ON s.id = a.session_id ORDER BY a.created_at, a.id`)
	if err != nil {
		return fmt.Errorf("looking up artifacts' lineage: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a AffectedArtifact
		var installs, owner string
		if err := rows.Scan(&a.ID, &a.SessionID, &a.Path, &a.SHA256, &a.SnapshotID, &installs, &owner); err != nil {
			return err
		}
		a.Owner = owner
		var inst []manifest.Package
		_ = json.Unmarshal([]byte(installs), &inst)
		for _, p := range inst {
			if q.Matches(p) {
				a.Packages = append(a.Packages, p)
			}
		}
		switch {
		case len(a.Packages) > 0:
			a.Via = "session install"
			if _, ok := sessions[a.SessionID]; !ok || sessions[a.SessionID].Via != "session install" {
				sessions[a.SessionID] = AffectedSession{ID: a.SessionID, Owner: owner, SnapshotID: a.SnapshotID, Via: "session install"}
			}
		case len(bySnap[a.SnapshotID]) > 0:
			a.Via, a.Packages = "snapshot", bySnap[a.SnapshotID]
			if _, ok := sessions[a.SessionID]; !ok {
				sessions[a.SessionID] = AffectedSession{ID: a.SessionID, Owner: owner, SnapshotID: a.SnapshotID, Via: "snapshot"}
			}
		default:
			continue
		}
		out.Artifacts = append(out.Artifacts, a)
	}
	return rows.Err()
}

// The manifest tables are granted like snapshots (configTables, roles.go): teams, whose
// applies build, write them; harnesses read them for lineage and the advisory query. On
// PostgreSQL only the role that recorded a manifest may replace or delete it and its
// package rows (migration 16, package_index_owners.go).
func init() {
	configTables = append(configTables, "snapshot_manifests", "snapshot_packages")
}
