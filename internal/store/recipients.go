package store

import (
	"context"
	"fmt"
	"time"
)

// migrationRecipients (21): who may download an artifact given its classification
// (issue 27). The operator's policy decides by classification (policy.Downloads); a
// restricted file goes to nobody until an admin releases it, and a release is a row of
// artifact_releases: the artifact (its id, so one offer's bytes: a path offered again is
// a new artifact, released again), to whom (a user's name, or ReleaseToAll for anyone
// who may see the session), by whom, when and why. A release of the same artifact to
// the same recipient again replaces the row (the latest admin and note stand; the audit
// log keeps each). Releases go with their artifact, and so with its session.
//
// artifacts gains detected_type: what the content is (filetype.Sniff), recorded when
// the file is offered, so that lists and the web page's download card say it without
// reading the content (rows offered before this migration have "").
//
// Who writes: the harness (a runtime table; teams have no access on PostgreSQL).
var migrationRecipients = migration{sql: `
ALTER TABLE artifacts ADD COLUMN detected_type TEXT NOT NULL DEFAULT '';
CREATE TABLE artifact_releases (
	artifact_id TEXT NOT NULL REFERENCES artifacts(id) ON DELETE CASCADE,
	released_to TEXT NOT NULL,
	released_by TEXT NOT NULL,
	released_at BIGINT NOT NULL,
	note        TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (artifact_id, released_to)
);
`}

// ReleaseToAll releases an artifact to anyone who may see its session.
const ReleaseToAll = "*"

// Release is an admin's release of one artifact to a user (or ReleaseToAll).
type Release struct {
	ArtifactID string
	To         string
	By         string
	At         time.Time
	Note       string
}

// PutRelease records a release; one to the same recipient replaces it. An artifact
// that does not exist (any more) is ErrNotFound.
func (s *Store) PutRelease(ctx context.Context, r Release) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO artifact_releases(artifact_id, released_to, released_by, released_at, note) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT(artifact_id, released_to) DO UPDATE SET released_by = excluded.released_by, released_at = excluded.released_at, note = excluded.note`,
		r.ArtifactID, r.To, r.By, r.At.UnixMilli(), r.Note)
	return wrote(err, notFound("artifact %q", r.ArtifactID), "recording the release of artifact %q to %q", r.ArtifactID, r.To)
}

func scanRelease(sc scanner) (Release, error) {
	var r Release
	var at int64
	err := sc.Scan(&r.ArtifactID, &r.To, &r.By, &at, &r.Note)
	r.At = time.UnixMilli(at)
	return r, err
}

// SessionReleases lists the releases of every artifact of a session, oldest first.
func (s *Store) SessionReleases(ctx context.Context, sessionID string) ([]Release, error) {
	rs, err := queryRows(ctx, s.db, scanRelease, `SELECT r.artifact_id, r.released_to, r.released_by, r.released_at, r.note
		FROM artifact_releases r JOIN artifacts a ON a.id = r.artifact_id WHERE a.session_id = ? ORDER BY r.released_at, r.artifact_id, r.released_to`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("listing the releases of session %q's files: %w", sessionID, err)
	}
	return rs, nil
}

// DeleteRelease removes the release of an artifact to a recipient (none is no error).
func (s *Store) DeleteRelease(ctx context.Context, artifactID, to string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM artifact_releases WHERE artifact_id = ? AND released_to = ?`, artifactID, to); err != nil {
		return fmt.Errorf("removing the release of artifact %q to %q: %w", artifactID, to, err)
	}
	return nil
}
