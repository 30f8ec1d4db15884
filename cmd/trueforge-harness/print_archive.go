package main

import (
	"fmt"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/termsafe"
)

// renderArchiveExtracted prints an extract_archive run: the archive, where it went, what
// was made, each skipped entry with its reason, and why it stopped early if it did.
// Names come from the archive, so every one passes termsafe.
func (p *printer) renderArchiveExtracted(v events.ArchiveExtracted) {
	att := ""
	if v.AttachmentID != "" {
		att = ", attachment " + termsafe.Line(v.AttachmentID)
	}
	fmt.Fprintf(p.w, "  [archive] EXTRACTED %s (%s, sha256 %s%s) into %s/: %d files, %d folders, %d symlinks, %d hard links, %d bytes\n",
		termsafe.Line(v.Archive), v.Format, v.SHA256, att, termsafe.Line(v.Dest), v.Files, v.Dirs, v.Symlinks, v.HardLinks, v.Bytes)
	for _, s := range v.Skipped {
		fmt.Fprintf(p.w, "            skipped %s: %s\n", termsafe.Line(s.Name), termsafe.Line(s.Reason))
	}
	if more := v.SkippedTotal - len(v.Skipped); more > 0 {
		fmt.Fprintf(p.w, "            and %d more skipped (the tool's result lists them)\n", more)
	}
	if v.Stopped != "" {
		fmt.Fprintf(p.w, "            STOPPED (%s): %s\n", v.StoppedLimit, termsafe.Line(v.Stopped))
	}
}
