package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// migrationAttachments (19): files a user gives a session (issue 27). An attachment is
// a row of attachments (who uploaded what, when, its digest, declared and detected type
// and classification, the name it gets in the workspace) and content kept by digest:
// in attachment_blobs, or, when the operator configures a directory for them, in that
// directory (package attachments), in which case the blob row is absent. Content is
// shared by digest, like skill blobs: the same file attached twice is stored once.
//
// written_sandbox is the sandbox the file was last written into: the harness writes an
// attachment into /workspace/attachments/ when a tool call first needs the sandbox, and
// again into a new sandbox if the old one was deleted (its files went with it).
//
// Who writes: the harness (runtime tables; teams have no access on PostgreSQL). Rows go
// with their session.
var migrationAttachments = migration{sql: `
CREATE TABLE attachment_blobs (
	sha256     TEXT PRIMARY KEY,
	content    BLOB NOT NULL,
	size       BIGINT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE TABLE attachments (
	id              TEXT PRIMARY KEY,
	session_id      TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	uploader        TEXT NOT NULL,
	name            TEXT NOT NULL,
	original_name   TEXT NOT NULL,
	size            BIGINT NOT NULL,
	sha256          TEXT NOT NULL,
	declared_type   TEXT NOT NULL DEFAULT '',
	detected_type   TEXT NOT NULL DEFAULT '',
	classification  TEXT NOT NULL,
	in_directory    BIGINT NOT NULL DEFAULT 0,
	created_at      BIGINT NOT NULL,
	written_sandbox TEXT NOT NULL DEFAULT '',
	UNIQUE (session_id, name)
);
CREATE INDEX attachments_session ON attachments(session_id, created_at);
CREATE INDEX attachments_sha256 ON attachments(sha256);
`}

// Attachment is a file a user gave a session.
type Attachment struct {
	ID        string
	SessionID string
	// Uploader is the user who uploaded it.
	Uploader string
	// Name is the file's name in the workspace (/workspace/attachments/<Name>), made safe
	// and unique in the session; OriginalName is the name as the uploader gave it.
	Name         string
	OriginalName string
	Size         int64
	SHA256       string // hex
	// DeclaredType is the media type the uploader declared ("" when none),
	// DetectedType what the content is (filetype.Sniff).
	DeclaredType   string
	DetectedType   string
	Classification string
	// InDirectory: the content is kept in the operator's attachments directory, not in
	// attachment_blobs.
	InDirectory bool
	CreatedAt   time.Time
	// WrittenSandbox is the sandbox the file was last written into ("" when none yet).
	WrittenSandbox string
}

// ErrAttachmentName is an attachment whose name another attachment of the session has.
var ErrAttachmentName = errors.New("the session already has an attachment of that name")

const attachmentColumns = `id, session_id, uploader, name, original_name, size, sha256, declared_type, detected_type,
	classification, in_directory, created_at, written_sandbox`

func scanAttachment(sc scanner) (Attachment, error) {
	var a Attachment
	var inDir, created int64
	err := sc.Scan(&a.ID, &a.SessionID, &a.Uploader, &a.Name, &a.OriginalName, &a.Size, &a.SHA256, &a.DeclaredType, &a.DetectedType,
		&a.Classification, &inDir, &created, &a.WrittenSandbox)
	a.InDirectory, a.CreatedAt = inDir != 0, time.UnixMilli(created)
	return a, err
}

// PutAttachment records a, and content under its digest unless a.InDirectory (then the
// content is the caller's to keep) or the digest is stored already, in one transaction.
// A name the session already has is ErrAttachmentName.
func (s *Store) PutAttachment(ctx context.Context, a Attachment, content []byte) error {
	return s.inTx(ctx, func(tx *txn) error {
		var taken int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM attachments WHERE session_id = ? AND name = ?`, a.SessionID, a.Name).Scan(&taken); err != nil {
			return fmt.Errorf("checking attachment names of session %s: %w", a.SessionID, err)
		}
		if taken > 0 {
			return fmt.Errorf("attachment %q of session %s: %w", a.Name, a.SessionID, ErrAttachmentName)
		}
		if !a.InDirectory {
			if _, err := tx.ExecContext(ctx, `INSERT INTO attachment_blobs(sha256, content, size, created_at) VALUES (?, ?, ?, ?)
				ON CONFLICT(sha256) DO NOTHING`, a.SHA256, content, len(content), a.CreatedAt.UnixMilli()); err != nil {
				return fmt.Errorf("storing the content of attachment %q: %w", a.Name, err)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO attachments(`+attachmentColumns+`) VALUES (`+placeholders(13)+`)`,
			a.ID, a.SessionID, a.Uploader, a.Name, a.OriginalName, a.Size, a.SHA256, a.DeclaredType, a.DetectedType,
			a.Classification, b2i(a.InDirectory), a.CreatedAt.UnixMilli(), a.WrittenSandbox)
		if err != nil {
			return fmt.Errorf("recording attachment %q of session %s: %w", a.Name, a.SessionID, err)
		}
		return nil
	})
}

// GetAttachment reads attachment id of session sessionID; one of another session is
// ErrNotFound like a missing one.
func (s *Store) GetAttachment(ctx context.Context, sessionID, id string) (Attachment, error) {
	a, err := scanAttachment(s.db.QueryRowContext(ctx, `SELECT `+attachmentColumns+` FROM attachments WHERE id = ? AND session_id = ?`, id, sessionID))
	return found(a, err, "reading", "attachment %s of session %s", id, sessionID)
}

// ListAttachments lists a session's attachments, oldest first.
func (s *Store) ListAttachments(ctx context.Context, sessionID string) ([]Attachment, error) {
	as, err := queryRows(ctx, s.db, scanAttachment, `SELECT `+attachmentColumns+` FROM attachments WHERE session_id = ? ORDER BY created_at, id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("listing attachments of session %s: %w", sessionID, err)
	}
	return as, nil
}

// AttachmentsToWrite lists the session's attachments not yet written into sandboxID.
func (s *Store) AttachmentsToWrite(ctx context.Context, sessionID, sandboxID string) ([]Attachment, error) {
	as, err := queryRows(ctx, s.db, scanAttachment, `SELECT `+attachmentColumns+` FROM attachments
		WHERE session_id = ? AND written_sandbox <> ? ORDER BY created_at, id`, sessionID, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("listing attachments of session %s to write: %w", sessionID, err)
	}
	return as, nil
}

// MarkAttachmentWritten records that attachment id is in sandboxID's workspace.
func (s *Store) MarkAttachmentWritten(ctx context.Context, id, sandboxID string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE attachments SET written_sandbox = ? WHERE id = ?`, sandboxID, id); err != nil {
		return fmt.Errorf("recording attachment %s as written: %w", id, err)
	}
	return nil
}

// DeleteAttachment removes attachment id of session sessionID, and its stored content
// when no other attachment has the same digest. It returns what it removed, and
// whether the content is now unreferenced (for content kept in a directory, the
// caller's to remove). A missing one is ErrNotFound.
func (s *Store) DeleteAttachment(ctx context.Context, sessionID, id string) (a Attachment, orphaned bool, err error) {
	err = s.inTx(ctx, func(tx *txn) error {
		var err error
		a, err = scanAttachment(tx.QueryRowContext(ctx, `SELECT `+attachmentColumns+` FROM attachments WHERE id = ? AND session_id = ?`, id, sessionID))
		if a, err = found(a, err, "reading", "attachment %s of session %s", id, sessionID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM attachments WHERE id = ?`, id); err != nil {
			return fmt.Errorf("deleting attachment %s: %w", id, err)
		}
		var left int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM attachments WHERE sha256 = ?`, a.SHA256).Scan(&left); err != nil {
			return err
		}
		orphaned = left == 0
		if orphaned {
			_, err = tx.ExecContext(ctx, `DELETE FROM attachment_blobs WHERE sha256 = ?`, a.SHA256)
		}
		return err
	})
	return a, orphaned, err
}

// AttachmentContent reads the content stored under digest sha256 in attachment_blobs;
// ErrNotFound when none is (content kept in a directory is not here).
func (s *Store) AttachmentContent(ctx context.Context, sha256 string) ([]byte, error) {
	var content []byte
	err := s.db.QueryRowContext(ctx, `SELECT content FROM attachment_blobs WHERE sha256 = ?`, sha256).Scan(&content)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("attachment content %s: %w", sha256, ErrNotFound)
	}
	return content, err
}

// CountAttachments is how many attachments session sessionID has.
func (s *Store) CountAttachments(ctx context.Context, sessionID string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM attachments WHERE session_id = ?`, sessionID).Scan(&n)
	return n, err
}
