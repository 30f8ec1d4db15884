package attachments

import (
	"context"
	"fmt"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
)

// WriteInto writes the session's attachments that the lease's sandbox does not have yet
// into /workspace/attachments/, and returns a note for the model on each: written, or
// why not. It runs when a tool call has acquired the sandbox, so an attachment reaches
// a sandbox only once something needs one; a sandbox that was deleted and made anew
// (its files gone) gets them again.
func (s *Service) WriteInto(ctx context.Context, sessionID string, l *lifecycle.Lease) []string {
	sandboxID := l.Record.SandboxID
	todo, err := s.Store.AttachmentsToWrite(ctx, sessionID, sandboxID)
	if err != nil {
		return []string{"the session's attachments could not be read: " + err.Error()}
	}
	var notes []string
	for _, a := range todo {
		if err := s.writeOne(ctx, l, sandboxID, a.ID); err != nil {
			notes = append(notes, fmt.Sprintf("attachment %s was not written to %s: %v", a.Name, WorkspacePath(a), err))
			continue
		}
		notes = append(notes, fmt.Sprintf("attachment written to %s (%d bytes, sha256 %s, %s)", WorkspacePath(a), a.Size, a.SHA256, a.Classification))
	}
	return notes
}

func (s *Service) writeOne(ctx context.Context, l *lifecycle.Lease, sandboxID, id string) error {
	a, err := s.Store.GetAttachment(ctx, l.Record.SessionID, id)
	if err != nil {
		return err
	}
	r, err := s.Open(ctx, a)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := l.Runtime.WriteFile(ctx, sandboxID, WorkspacePath(a), r, 0o644); err != nil {
		return err
	}
	return s.Store.MarkAttachmentWritten(ctx, a.ID, sandboxID)
}
