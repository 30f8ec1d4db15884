package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/archive"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// record stores the extraction's provenance (what offer_artifact puts in the lineage of
// a file from dest, or of the archive) and appends its archive_extracted event. Neither
// failing undoes the extraction: the result says so instead.
func (x *extraction) record(rep *archive.Report, sum string, size int64) events.ArchiveExtracted {
	ctx := context.WithoutCancel(x.ctx)
	st, c := x.in.x.Store, x.in.c
	attID, class := x.in.attachmentOf(ctx, x.src, sum)
	ex := store.Extraction{ID: newID(), SessionID: c.SessionID, Dest: x.dest, ArchivePath: x.src, ArchiveSHA256: sum, Format: string(rep.Format),
		AttachmentID: attID, Classification: class, Entries: rep.Entries(), Bytes: rep.Bytes, Skipped: len(rep.Skipped), SourceEvent: c.Event,
		CreatedAt: x.in.x.now()}
	if err := st.PutExtraction(ctx, ex); err != nil {
		x.problems = append(x.problems, "the archive's provenance was not recorded, so files offered from "+x.dest+" will not name it: "+err.Error())
	}
	ev := events.ArchiveExtracted{Archive: x.src, SHA256: sum, Size: size, Format: string(rep.Format), AttachmentID: attID, Dest: x.dest,
		Files: rep.Files, Dirs: rep.Dirs, Symlinks: rep.Symlinks, HardLinks: rep.HardLinks, Bytes: rep.Bytes,
		Skipped: []events.SkippedEntry{}, SkippedTotal: len(rep.Skipped), Extraction: ex.ID}
	for _, s := range rep.Skipped[:min(len(rep.Skipped), events.MaxSkippedRecorded)] {
		ev.Skipped = append(ev.Skipped, events.SkippedEntry{Name: s.Name, Reason: s.Reason})
	}
	if s := rep.Stopped; s != nil {
		ev.StoppedLimit, ev.Stopped = s.Limit, s.Reason
	}
	if _, err := events.Append(ctx, st, c.SessionID, c.RunID, ev); err != nil {
		x.problems = append(x.problems, "the extraction was not recorded in the session's log: "+err.Error())
	}
	return ev
}

// attachmentOf names the attachment an archive at workspace path p with digest sum was
// written from, and its classification: one of the session's attachments at that path
// whose content is still the same ("" when none).
func (in invocation) attachmentOf(ctx context.Context, p, sum string) (string, string) {
	name, ok := strings.CutPrefix(p, attachmentsDir)
	if !ok {
		return "", ""
	}
	list, err := in.x.Store.ListAttachments(ctx, in.c.SessionID)
	if err != nil {
		return "", ""
	}
	for _, a := range list {
		if a.Name == name && a.SHA256 == sum {
			return a.ID, a.Classification
		}
	}
	return "", ""
}

// report is the result the model sees: what was made, every skipped entry with its
// reason (the first maxSkippedShown), and why the extraction stopped early.
func (x *extraction) report(rep *archive.Report, ev events.ArchiveExtracted) string {
	var b strings.Builder
	att := ""
	if ev.AttachmentID != "" {
		att = ", attachment " + ev.AttachmentID
	}
	fmt.Fprintf(&b, "extracted %s (%s, %d bytes, sha256 %s%s) into %s/: %s (%d bytes), %s, %s, %s (made as copies)",
		showName(x.src), rep.Format, ev.Size, ev.SHA256, att, showName(x.dest), plural(rep.Files, "file"), rep.Bytes,
		plural(rep.Dirs, "folder"), plural(rep.Symlinks, "symlink"), plural(rep.HardLinks, "hard link"))
	if len(x.stripped) > 0 {
		fmt.Fprintf(&b, "\nset-user-ID, set-group-ID and sticky bits dropped from %s: %s", plural(len(x.stripped), "file"),
			strings.Join(x.stripped[:min(len(x.stripped), 20)], ", "))
	}
	if len(rep.Skipped) > 0 {
		fmt.Fprintf(&b, "\nskipped %s (nothing of them was written):", plural(len(rep.Skipped), "entry"))
		for _, s := range rep.Skipped[:min(len(rep.Skipped), maxSkippedShown)] {
			fmt.Fprintf(&b, "\n- %s: %s", s.Name, s.Reason)
		}
		if more := len(rep.Skipped) - maxSkippedShown; more > 0 {
			fmt.Fprintf(&b, "\n- and %d more", more)
		}
	}
	if s := rep.Stopped; s != nil {
		fmt.Fprintf(&b, "\nSTOPPED (%s): %s", s.Limit, s.Reason)
		if s.Partial && s.Entry != "" {
			fmt.Fprintf(&b, "; %s was being extracted and was removed", s.Entry)
		}
		if rep.NotLookedAt > 0 {
			fmt.Fprintf(&b, "; %d entries were not looked at", rep.NotLookedAt)
		}
		b.WriteString(". What was extracted before the stop is in place.")
	}
	for _, p := range x.problems {
		b.WriteString("\nproblem: " + p)
	}
	return b.String()
}

// plural is n and noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case strings.HasSuffix(noun, "y"):
		return fmt.Sprintf("%d %sies", n, noun[:len(noun)-1])
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
