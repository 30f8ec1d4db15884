package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Attachments on both databases: a name is unique per session, content is kept once
// per digest and removed with the last attachment that has it, another session's id is
// ErrNotFound, and which sandbox has a file is recorded; the rows go with the session.
func TestAttachments(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		for _, id := range []string{"s1", "s2"} {
			must(t, st.CreateSession(ctx, Session{ID: id, Agent: "pr-bot", Owner: "alice"}))
		}
		at := time.UnixMilli(1_700_000_000_000)
		a := Attachment{ID: "att-1", SessionID: "s1", Uploader: "alice", Name: "a.txt", OriginalName: "../a.txt", Size: 3, SHA256: "abc",
			DeclaredType: "text/plain", DetectedType: "text", Classification: "untrusted", CreatedAt: at}
		must(t, st.PutAttachment(ctx, a, []byte("abc")))
		b := a
		b.ID, b.SessionID = "att-2", "s2"
		must(t, st.PutAttachment(ctx, b, []byte("abc")))
		dup := a
		dup.ID = "att-3"
		if err := st.PutAttachment(ctx, dup, []byte("abc")); !errors.Is(err, ErrAttachmentName) {
			t.Fatalf("a second a.txt in s1: %v", err)
		}
		got, err := reopen(t, st).GetAttachment(ctx, "s1", "att-1")
		if err != nil || got.OriginalName != "../a.txt" || got.DeclaredType != "text/plain" || !got.CreatedAt.Equal(at) || got.WrittenSandbox != "" {
			t.Fatalf("GetAttachment: %+v, %v", got, err)
		}
		if _, err := st.GetAttachment(ctx, "s1", "att-2"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another session's attachment: %v", err)
		}
		must(t, st.MarkAttachmentWritten(ctx, "att-1", "sb-1"))
		if todo, err := st.AttachmentsToWrite(ctx, "s1", "sb-1"); err != nil || len(todo) != 0 {
			t.Fatalf("to write into sb-1: %v, %v", todo, err)
		}
		if todo, err := st.AttachmentsToWrite(ctx, "s1", "sb-2"); err != nil || len(todo) != 1 {
			t.Fatalf("to write into a new sandbox: %v, %v", todo, err)
		}
		if _, orphaned, err := st.DeleteAttachment(ctx, "s1", "att-1"); err != nil || orphaned {
			t.Fatalf("deleting one of two with the content: orphaned %v, %v", orphaned, err)
		}
		if c, err := st.AttachmentContent(ctx, "abc"); err != nil || string(c) != "abc" {
			t.Fatalf("content still referenced: %q, %v", c, err)
		}
		must(t, st.DeleteSession(ctx, "s2"))
		if n, err := st.CountAttachments(ctx, "s2"); err != nil || n != 0 {
			t.Fatalf("a deleted session's attachments: %d, %v", n, err)
		}
	})
}

// The harness's role keeps attachments on PostgreSQL (runtime tables); a team reads
// none.
func TestAttachmentsHarnessRole(t *testing.T) {
	p := newRLSPlane(t)
	ctx := context.Background()
	must(t, p.asHarness.CreateSession(ctx, Session{ID: "s1", Agent: "pr-bot", Owner: "alice"}))
	a := Attachment{ID: "att-1", SessionID: "s1", Uploader: "alice", Name: "a.txt", OriginalName: "a.txt", Size: 1, SHA256: "ab",
		DetectedType: "text", Classification: "untrusted", CreatedAt: time.UnixMilli(5)}
	must(t, p.asHarness.PutAttachment(ctx, a, []byte("x")))
	if c, err := p.asHarness.AttachmentContent(ctx, "ab"); err != nil || string(c) != "x" {
		t.Fatalf("as the harness: %q, %v", c, err)
	}
	if _, err := p.asAlice.AttachmentContent(ctx, "ab"); err == nil {
		t.Error("a team read an attachment's content")
	}
}
