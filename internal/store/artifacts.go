package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/manifest"
)

// Artifact is a file a session offered for download, with its lineage: the digest and
// size of the bytes kept, the event that offered it, how it is classified, when the
// offer expires, which snapshot and sandbox it came from and the commands run in that
// sandbox before it was offered.
type Artifact struct {
	ID             string
	SessionID      string
	Path           string
	SHA256         string
	Size           int64
	SourceEvent    int64
	Classification string
	ExpiresAt      time.Time
	SnapshotID     string
	SandboxID      string
	Commands       []string
	// ManifestDigest is the digest of the manifest of the snapshot the sandbox came from
	// ("" when none was recorded), and SessionInstalls the packages the session installed
	// on top of it before the offer (a diff of the same package databases).
	ManifestDigest  string
	SessionInstalls []manifest.Package
	// Provenance is the archives the file came from (extract_archive; provenance.go),
	// nil when none.
	Provenance []Provenance
	// DetectedType is what the content is (filetype.Sniff), recorded at offer time; ""
	// for a file offered before it was recorded (migration 21).
	DetectedType string
	Content      []byte
	CreatedAt    time.Time
}

// PutArtifact stores an artifact.
func (s *Store) PutArtifact(ctx context.Context, a Artifact) error {
	cmds, _ := json.Marshal(nonNil(a.Commands))
	installs, _ := json.Marshal(nonNil(a.SessionInstalls))
	_, err := s.db.ExecContext(ctx, `INSERT INTO artifacts(id, session_id, path, sha256, size, source_event, classification, expires_at,
		snapshot_id, sandbox_id, commands, manifest_digest, session_installs, provenance, detected_type, content, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.SessionID, a.Path, a.SHA256, a.Size, a.SourceEvent, a.Classification, a.ExpiresAt.UnixMilli(),
		a.SnapshotID, a.SandboxID, string(cmds), a.ManifestDigest, string(installs), provenanceJSON(a.Provenance), a.DetectedType, a.Content, a.CreatedAt.UnixMilli())
	if err != nil {
		return fmt.Errorf("storing artifact %s: %w", a.Path, err)
	}
	return nil
}

const artifactSelect = `SELECT id, session_id, path, sha256, size, source_event, classification, expires_at, snapshot_id, sandbox_id,
	commands, manifest_digest, session_installs, provenance, detected_type, created_at FROM artifacts`

func scanArtifact(sc scanner) (Artifact, error) {
	var a Artifact
	var cmds, installs, prov string
	var exp, created int64
	err := sc.Scan(&a.ID, &a.SessionID, &a.Path, &a.SHA256, &a.Size, &a.SourceEvent, &a.Classification, &exp, &a.SnapshotID, &a.SandboxID,
		&cmds, &a.ManifestDigest, &installs, &prov, &a.DetectedType, &created)
	_ = json.Unmarshal([]byte(cmds), &a.Commands)
	_ = json.Unmarshal([]byte(installs), &a.SessionInstalls)
	if prov != "[]" {
		_ = json.Unmarshal([]byte(prov), &a.Provenance)
	}
	a.ExpiresAt, a.CreatedAt = time.UnixMilli(exp), time.UnixMilli(created)
	return a, err
}

// ListArtifacts lists a session's artifacts (without content), oldest first.
func (s *Store) ListArtifacts(ctx context.Context, sessionID string) ([]Artifact, error) {
	artifacts, err := queryRows(ctx, s.db, scanArtifact, artifactSelect+` WHERE session_id = ? ORDER BY created_at, id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("listing artifacts of session %q: %w", sessionID, err)
	}
	return artifacts, nil
}

// GetArtifact returns the newest artifact of a session at path, content included.
func (s *Store) GetArtifact(ctx context.Context, sessionID, path string) (Artifact, error) {
	a, err := scanArtifact(s.db.QueryRowContext(ctx, artifactSelect+` WHERE session_id = ? AND path = ? ORDER BY created_at DESC, id DESC LIMIT 1`, sessionID, path))
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("artifact %q of session %q: %w", path, sessionID, ErrNotFound)
	}
	if err != nil {
		return a, fmt.Errorf("reading artifact %q: %w", path, err)
	}
	err = s.db.QueryRowContext(ctx, `SELECT content FROM artifacts WHERE id = ?`, a.ID).Scan(&a.Content)
	return a, err
}
