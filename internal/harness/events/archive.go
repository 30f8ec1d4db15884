package events

// KindArchiveExtracted: extract_archive unpacked an archive of the workspace into a
// folder of it.
const KindArchiveExtracted = "archive_extracted"

// MaxSkippedRecorded bounds the skipped entries an archive_extracted event lists (an
// archive may skip thousands); SkippedTotal counts them all.
const MaxSkippedRecorded = 100

// ArchiveExtracted records an extraction: which archive (its workspace path, SHA-256,
// size and format, and the attachment it was when it was one), into which folder, what
// was made, every entry skipped and why (at most MaxSkippedRecorded), and why the
// extraction stopped early when it did. Extraction is the id of its provenance record,
// which artifacts offered from the folder carry.
type ArchiveExtracted struct {
	Archive      string `json:"archive"`
	SHA256       string `json:"sha256"`
	Size         int64  `json:"size"`
	Format       string `json:"format"`
	AttachmentID string `json:"attachment_id,omitempty"`
	Dest         string `json:"dest"`
	Files        int    `json:"files"`
	Dirs         int    `json:"dirs"`
	Symlinks     int    `json:"symlinks"`
	HardLinks    int    `json:"hard_links"`
	Bytes        int64  `json:"bytes"`
	// Skipped are the entries not made, each with its reason.
	Skipped      []SkippedEntry `json:"skipped"`
	SkippedTotal int            `json:"skipped_total"`
	// Stopped is why the extraction ended before the archive's end ("" when it did not):
	// StoppedLimit the limit passed (max_entries, max_bytes, max_ratio) or "damaged".
	StoppedLimit string `json:"stopped_limit,omitempty"`
	Stopped      string `json:"stopped,omitempty"`
	Extraction   string `json:"extraction"`
}

// SkippedEntry is an archive entry that was not extracted: its name as the archive has
// it (quoted when it holds control characters) and why.
type SkippedEntry struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

func (ArchiveExtracted) Kind() string { return KindArchiveExtracted }

// Registered here rather than in the table of events.go, beside the payload it reads.
func init() { decoders[KindArchiveExtracted] = plain[ArchiveExtracted] }
