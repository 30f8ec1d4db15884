package eventstest

import "github.com/trueforge/terraform-provider-trueforge/internal/harness/events"

func init() {
	Logs = append(Logs, Log{"archive extracted with entries skipped", events.KindArchiveExtracted,
		`{"archive":"attachments/src.tgz","sha256":"9f2c","size":2048,"format":"tar.gz","attachment_id":"att-1","dest":"attachments/src","files":3,"dirs":1,` +
			`"symlinks":0,"hard_links":0,"bytes":120,"skipped":[{"name":"../../evil","reason":"the name has a \"..\" component, which would lead out of the destination"}],` +
			`"skipped_total":1,"stopped_limit":"max_ratio","stopped":"the archive unpacks to more than 100 times its compressed size","extraction":"ex-1"}`,
		events.ArchiveExtracted{Archive: "attachments/src.tgz", SHA256: "9f2c", Size: 2048, Format: "tar.gz", AttachmentID: "att-1", Dest: "attachments/src",
			Files: 3, Dirs: 1, Bytes: 120, Skipped: []events.SkippedEntry{{Name: "../../evil", Reason: `the name has a ".." component, which would lead out of the destination`}},
			SkippedTotal: 1, StoppedLimit: "max_ratio", Stopped: "the archive unpacks to more than 100 times its compressed size", Extraction: "ex-1"}})
}
