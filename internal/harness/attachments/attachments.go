// Package attachments keeps the files a user gives a session: stored by digest when
// uploaded (streamed, capped), described to the model by name, size, type and digest,
// and written into the session's workspace (/workspace/attachments/<name>) only when a
// tool call first needs the sandbox, so attaching a file provisions nothing.
//
// Content lives in the store (attachment_blobs, like skill blobs) or, when the operator
// names a directory, in that directory under its SHA-256 (two levels: ab/abcdef...), so
// large files never pass through the database. Replicas that share a store must share
// that directory too.
//
// Defaults: 64 MiB per attachment (MaxBytes), 100 attachments per session
// (MaxPerSession), classification "untrusted" unless the uploader says otherwise, names
// made safe and at most 120 bytes (SafeName).
package attachments

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/filetype"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Defaults (see the package doc).
const (
	DefaultMaxBytes      = 64 << 20
	DefaultMaxPerSession = 100
	// WorkspaceDir is where attachments are written in the workspace.
	WorkspaceDir = "/workspace/attachments"
	// sniffBytes is how much of the head filetype.Sniff reads.
	sniffBytes = 8 << 10
)

var (
	// ErrTooLarge is an upload past the size cap.
	ErrTooLarge = errors.New("the attachment is too large")
	// ErrTooMany is an upload to a session that has as many attachments as allowed.
	ErrTooMany = errors.New("the session has too many attachments")
	// ErrBadName is a name that leaves nothing usable once made safe.
	ErrBadName = errors.New("the attachment's name is not usable")
	// ErrBadClassification is a classification that is not one of tools.Classifications.
	ErrBadClassification = errors.New("unknown classification")
	// ErrEmpty is an upload with no bytes.
	ErrEmpty = errors.New("the attachment is empty")
)

// Service stores and hands out attachments.
type Service struct {
	Store *store.Store
	// Dir, when set, keeps content in this directory instead of the store.
	Dir string
	// MaxBytes caps one attachment (0: DefaultMaxBytes); MaxPerSession caps how many a
	// session may have (0: DefaultMaxPerSession).
	MaxBytes      int64
	MaxPerSession int
	Now           func() time.Time
}

// Upload is what the uploader says of a file.
type Upload struct {
	// Name is the file's name as given (a path's last element is kept).
	Name string
	// DeclaredType is the media type the uploader declared ("" when none).
	DeclaredType string
	// Classification defaults to "untrusted".
	Classification string
	Uploader       string
}

// MaxBytesOrDefault is the cap on one attachment: MaxBytes, or DefaultMaxBytes.
func (s *Service) MaxBytesOrDefault() int64 {
	if s.MaxBytes > 0 {
		return s.MaxBytes
	}
	return DefaultMaxBytes
}

func (s *Service) maxPerSession() int {
	if s.MaxPerSession > 0 {
		return s.MaxPerSession
	}
	return DefaultMaxPerSession
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Put reads body (at most the cap, never more than one byte past it) and stores it as
// an attachment of session sessionID. The name is made safe and unique in the session
// (a second "report.pdf" becomes "report-2.pdf").
func (s *Service) Put(ctx context.Context, sessionID string, up Upload, body io.Reader) (store.Attachment, error) {
	a := store.Attachment{SessionID: sessionID, Uploader: up.Uploader, OriginalName: up.Name, DeclaredType: up.DeclaredType,
		Classification: up.Classification, CreatedAt: s.now()}
	if a.Classification == "" {
		a.Classification = tools.DefaultClassfication
	}
	if !slices.Contains(tools.Classifications, a.Classification) {
		return a, fmt.Errorf("%w %q: use one of %s", ErrBadClassification, a.Classification, strings.Join(tools.Classifications, ", "))
	}
	name, err := SafeName(up.Name)
	if err != nil {
		return a, err
	}
	existing, err := s.Store.ListAttachments(ctx, sessionID)
	if err != nil {
		return a, err
	}
	if len(existing) >= s.maxPerSession() {
		return a, fmt.Errorf("%w: it has %d, the most a session may have; start a new session or ask the operator to raise --max-attachments", ErrTooMany, len(existing))
	}
	a.Name = uniqueName(name, existing)
	a.ID = newID()
	var content []byte
	if s.Dir != "" {
		err = s.putFile(body, &a)
	} else {
		content, err = s.read(body, &a)
	}
	if err != nil {
		return a, err
	}
	if err := s.Store.PutAttachment(ctx, a, content); err != nil {
		return a, err
	}
	return a, nil
}

// read takes the whole upload into memory (the store keeps it as one value).
func (s *Service) read(body io.Reader, a *store.Attachment) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(body, s.MaxBytesOrDefault()+1)); err != nil {
		return nil, fmt.Errorf("reading the upload: %w", err)
	}
	if err := s.sized(int64(buf.Len())); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(buf.Bytes())
	a.Size, a.SHA256 = int64(buf.Len()), hex.EncodeToString(sum[:])
	a.DetectedType = filetype.Sniff(buf.Bytes()[:min(buf.Len(), sniffBytes)])
	return buf.Bytes(), nil
}

// putFile streams the upload into the directory: to a temporary file while hashing,
// then renamed to its digest's name (content already there is kept as it is).
func (s *Service) putFile(body io.Reader, a *store.Attachment) (err error) {
	tmpDir := filepath.Join(s.Dir, "tmp")
	if err := os.MkdirAll(tmpDir, 0o700); err != nil {
		return fmt.Errorf("attachments directory: %w", err)
	}
	f, err := os.CreateTemp(tmpDir, "upload-*")
	if err != nil {
		return fmt.Errorf("attachments directory: %w", err)
	}
	defer func() {
		_ = f.Close()
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	h := sha256.New()
	head := &headWriter{max: sniffBytes}
	n, err := copyHashed(io.MultiWriter(f, head), body, h, s.MaxBytesOrDefault()+1)
	if err != nil {
		return fmt.Errorf("reading the upload: %w", err)
	}
	if err := s.sized(n); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("attachments directory: %w", err)
	}
	a.Size, a.SHA256, a.InDirectory = n, hex.EncodeToString(h.Sum(nil)), true
	a.DetectedType = filetype.Sniff(head.b)
	dst := s.blobPath(a.SHA256)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("attachments directory: %w", err)
	}
	if _, statErr := os.Stat(dst); statErr == nil {
		return os.Remove(f.Name()) // the same bytes are stored already
	}
	if err := os.Rename(f.Name(), dst); err != nil {
		return fmt.Errorf("attachments directory: %w", err)
	}
	return nil
}

func (s *Service) sized(n int64) error {
	switch {
	case n > s.MaxBytesOrDefault():
		return fmt.Errorf("%w: more than %d bytes (the cap per attachment); split it or ask the operator to raise --max-attachment-bytes", ErrTooLarge, s.MaxBytesOrDefault())
	case n == 0:
		return fmt.Errorf("%w: send the file's bytes as the request body", ErrEmpty)
	}
	return nil
}

func (s *Service) blobPath(sum string) string {
	return filepath.Join(s.Dir, sum[:2], sum)
}

// Open reads an attachment's content.
func (s *Service) Open(ctx context.Context, a store.Attachment) (io.ReadCloser, error) {
	if a.InDirectory {
		if s.Dir == "" {
			return nil, fmt.Errorf("attachment %s is kept in an attachments directory and this harness has none: start it with the same --attachments-dir as the one that stored it", a.ID)
		}
		f, err := os.Open(s.blobPath(a.SHA256))
		if err != nil {
			return nil, fmt.Errorf("attachment %s: %w", a.ID, err)
		}
		return f, nil
	}
	content, err := s.Store.AttachmentContent(ctx, a.SHA256)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(content)), nil
}

// Delete removes an attachment of the session (and its content once nothing else
// refers to it). A file already written into a sandbox stays there.
func (s *Service) Delete(ctx context.Context, sessionID, id string) error {
	a, orphaned, err := s.Store.DeleteAttachment(ctx, sessionID, id)
	if err != nil {
		return err
	}
	if orphaned && a.InDirectory && s.Dir != "" {
		if err := os.Remove(s.blobPath(a.SHA256)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing the content of attachment %s: %w", id, err)
		}
	}
	return nil
}

// Resolve reads the attachments ids names, all of session sessionID; an id that is
// not one of them is store.ErrNotFound, naming it.
func (s *Service) Resolve(ctx context.Context, sessionID string, ids []string) ([]store.Attachment, error) {
	out := make([]store.Attachment, 0, len(ids))
	for i, id := range ids {
		a, err := s.Store.GetAttachment(ctx, sessionID, id)
		if err != nil {
			return nil, fmt.Errorf("attachments[%d]: %w", i, err)
		}
		if !slices.ContainsFunc(out, func(b store.Attachment) bool { return b.ID == a.ID }) {
			out = append(out, a)
		}
	}
	return out, nil
}

// Event is attachment a as a user message carries it.
func Event(a store.Attachment) events.Attachment {
	return events.Attachment{ID: a.ID, Name: a.Name, Path: WorkspacePath(a), Size: a.Size, SHA256: a.SHA256,
		DeclaredType: a.DeclaredType, DetectedType: a.DetectedType, Classification: a.Classification, Uploader: a.Uploader}
}

// WorkspacePath is where attachment a is written in the workspace.
func WorkspacePath(a store.Attachment) string { return WorkspaceDir + "/" + a.Name }

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "att-" + hex.EncodeToString(b[:])
}

// headWriter keeps the first max bytes written to it.
type headWriter struct {
	b   []byte
	max int
}

func (w *headWriter) Write(p []byte) (int, error) {
	if room := w.max - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}
