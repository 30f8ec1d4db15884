package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// migrationProvenance (20): where workspace files came from (issue 27, extract_archive).
//
// extractions holds one row per archive that extract_archive unpacked in a session's
// sandbox: the archive (its workspace path and SHA-256, and the attachment it was
// written from with that attachment's classification, when it was one), the folder it
// was unpacked into, and what was made and skipped. A file offered later from under
// that folder, or the archive itself, carries this record in its artifact's lineage
// (artifacts.provenance, JSON: Artifact.Provenance), so that a download says it came
// from an archive and which one, not only which commands ran before it.
//
// A runtime table (runtimeTables): the harness writes it, teams have no access, and it
// goes with its session (ON DELETE CASCADE). The index serves a session's lookups,
// newest first.
var migrationProvenance = migration{sql: `
CREATE TABLE extractions (
	id             TEXT PRIMARY KEY,
	session_id     TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	dest           TEXT NOT NULL,
	archive_path   TEXT NOT NULL,
	archive_sha256 TEXT NOT NULL,
	format         TEXT NOT NULL DEFAULT '',
	attachment_id  TEXT NOT NULL DEFAULT '',
	classification TEXT NOT NULL DEFAULT '',
	entries        BIGINT NOT NULL DEFAULT 0,
	bytes          BIGINT NOT NULL DEFAULT 0,
	skipped        BIGINT NOT NULL DEFAULT 0,
	source_event   BIGINT NOT NULL DEFAULT 0,
	created_at     BIGINT NOT NULL
);
CREATE INDEX extractions_session ON extractions(session_id, created_at);
ALTER TABLE artifacts ADD COLUMN provenance TEXT NOT NULL DEFAULT '[]';
`}

// Extraction is an archive unpacked in a session's sandbox.
type Extraction struct {
	ID        string
	SessionID string
	// Dest is the folder it was unpacked into, ArchivePath the archive (both
	// workspace-relative, slash-separated, as tools.CleanPath makes them).
	Dest          string
	ArchivePath   string
	ArchiveSHA256 string
	Format        string
	// AttachmentID and Classification name the attachment the archive was written from
	// and how it is classified ("" when it was none, or no lookup said).
	AttachmentID   string
	Classification string
	// Entries made, Bytes of their content, entries Skipped.
	Entries     int
	Bytes       int64
	Skipped     int
	SourceEvent int64 // the tool call's event
	CreatedAt   time.Time
}

// Roles of an extraction in a file's provenance.
const (
	ProvenanceExtracted = "extracted" // the file is under the folder the archive was unpacked into
	ProvenanceArchive   = "archive"   // the file is the archive itself
	ProvenanceNested    = "nested"    // an archive the file came from was itself unpacked from this one
	// ProvenanceWorkspace: the archive was unpacked in the session's workspace before the
	// file was offered, elsewhere than where the file is. The file may have been made
	// from its contents (a report of an extracted repository): which files a command
	// read is not known, so every such archive is named, newest first, at most
	// maxWorkspaceProvenance of them.
	ProvenanceWorkspace = "workspace"
)

// maxWorkspaceProvenance bounds the workspace archives one artifact's lineage names.
const maxWorkspaceProvenance = 16

// Provenance is an extraction as an artifact's lineage shows it.
type Provenance struct {
	Role           string    `json:"role"`
	Extraction     string    `json:"extraction"`
	Archive        string    `json:"archive"`
	ArchiveSHA256  string    `json:"archive_sha256"`
	Dest           string    `json:"dest"`
	AttachmentID   string    `json:"attachment_id,omitempty"`
	Classification string    `json:"classification,omitempty"`
	ExtractedAt    time.Time `json:"extracted_at"`
}

// PutExtraction records an extraction.
func (s *Store) PutExtraction(ctx context.Context, e Extraction) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO extractions(id, session_id, dest, archive_path, archive_sha256, format, attachment_id, classification,
		entries, bytes, skipped, source_event, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, e.SessionID, e.Dest, e.ArchivePath, e.ArchiveSHA256, e.Format, e.AttachmentID, e.Classification,
		e.Entries, e.Bytes, e.Skipped, e.SourceEvent, e.CreatedAt.UnixMilli())
	if err != nil {
		return fmt.Errorf("recording the extraction of %s into %s: %w", e.ArchivePath, e.Dest, err)
	}
	return nil
}

func scanExtraction(sc scanner) (Extraction, error) {
	var e Extraction
	var created int64
	err := sc.Scan(&e.ID, &e.SessionID, &e.Dest, &e.ArchivePath, &e.ArchiveSHA256, &e.Format, &e.AttachmentID, &e.Classification,
		&e.Entries, &e.Bytes, &e.Skipped, &e.SourceEvent, &created)
	e.CreatedAt = time.UnixMilli(created)
	return e, err
}

// ListExtractions lists a session's extractions, newest first.
func (s *Store) ListExtractions(ctx context.Context, sessionID string) ([]Extraction, error) {
	list, err := queryRows(ctx, s.db, scanExtraction, `SELECT id, session_id, dest, archive_path, archive_sha256, format, attachment_id, classification,
		entries, bytes, skipped, source_event, created_at FROM extractions WHERE session_id = ? ORDER BY created_at DESC, id DESC`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("listing the extractions of session %q: %w", sessionID, err)
	}
	return list, nil
}

// maxProvenanceDepth bounds how many archives within archives a file's provenance
// follows.
const maxProvenanceDepth = 8

// ProvenanceOf is where workspace path p (cleaned) of a session came from: the newest
// extraction into each folder that holds it, or whose archive it is, then, for each,
// the extractions its archive came from in turn (nested), newest first. Nil when none.
func (s *Store) ProvenanceOf(ctx context.Context, sessionID, p string) ([]Provenance, error) {
	list, err := s.ListExtractions(ctx, sessionID)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return provenanceOf(list, p), nil
}

// provenanceOf is ProvenanceOf over a session's extractions, newest first.
func provenanceOf(list []Extraction, p string) []Provenance {
	var out []Provenance
	seen := map[string]bool{}
	paths := []string{p}
	for depth := 0; len(paths) > 0 && depth < maxProvenanceDepth; depth++ {
		var next []string
		for _, cur := range paths {
			dests := map[string]bool{}
			for _, e := range list {
				role := ""
				switch {
				case cur == e.ArchivePath && depth == 0:
					role = ProvenanceArchive
				case strings.HasPrefix(cur, e.Dest+"/") && !dests[e.Dest]:
					// Only the newest extraction into a folder made what is there now.
					dests[e.Dest], role = true, ProvenanceExtracted
					if depth > 0 {
						role = ProvenanceNested
					}
				}
				if role == "" || seen[e.ID] {
					continue
				}
				seen[e.ID] = true
				out = append(out, Provenance{Role: role, Extraction: e.ID, Archive: e.ArchivePath, ArchiveSHA256: e.ArchiveSHA256, Dest: e.Dest,
					AttachmentID: e.AttachmentID, Classification: e.Classification, ExtractedAt: e.CreatedAt})
				next = append(next, e.ArchivePath)
			}
		}
		paths = next
	}
	n := 0
	for _, e := range list {
		if seen[e.ID] || n == maxWorkspaceProvenance {
			continue
		}
		n++
		out = append(out, Provenance{Role: ProvenanceWorkspace, Extraction: e.ID, Archive: e.ArchivePath, ArchiveSHA256: e.ArchiveSHA256, Dest: e.Dest,
			AttachmentID: e.AttachmentID, Classification: e.Classification, ExtractedAt: e.CreatedAt})
	}
	return out
}

// provenanceJSON is the stored form of an artifact's provenance.
func provenanceJSON(p []Provenance) string {
	b, _ := json.Marshal(nonNil(p))
	return string(b)
}
