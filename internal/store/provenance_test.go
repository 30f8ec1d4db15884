package store

import (
	"testing"
	"time"
)

// A file's provenance is the newest extraction into each folder that holds it (an
// older one into the same folder made what was there before), or the extraction of the
// archive it is, then the extractions its archive came from (nested), bounded.
func TestProvenanceOf(t *testing.T) {
	at := func(minute int) time.Time { return time.Date(2026, 12, 1, 10, minute, 0, 0, time.UTC) }
	// Newest first, as ListExtractions returns them.
	list := []Extraction{
		{ID: "inner", Dest: "outer/lib", ArchivePath: "outer/lib.zip", CreatedAt: at(3)},
		{ID: "outer-again", Dest: "outer", ArchivePath: "src2.tgz", CreatedAt: at(2)},
		{ID: "outer", Dest: "outer", ArchivePath: "attachments/src.tgz", AttachmentID: "att-1", Classification: "confidential", CreatedAt: at(1)},
		{ID: "other", Dest: "other", ArchivePath: "x.tar", CreatedAt: at(0)},
	}
	roles := func(p []Provenance) (out []string) {
		for _, v := range p {
			out = append(out, v.Role+":"+v.Extraction)
		}
		return out
	}
	// After the chain a file is in, every other archive unpacked in the workspace
	// before the offer, newest first: the file may have been made from it.
	for path, want := range map[string][]string{
		"outer/lib/a.go":      {"extracted:inner", "extracted:outer-again", "workspace:outer", "workspace:other"},
		"outer/readme":        {"extracted:outer-again", "workspace:inner", "workspace:outer", "workspace:other"},
		"outer/lib.zip":       {"archive:inner", "extracted:outer-again", "workspace:outer", "workspace:other"},
		"attachments/src.tgz": {"archive:outer", "workspace:inner", "workspace:outer-again", "workspace:other"},
		"elsewhere":           {"workspace:inner", "workspace:outer-again", "workspace:outer", "workspace:other"},
		"outerfile":           {"workspace:inner", "workspace:outer-again", "workspace:outer", "workspace:other"},
		// An archive from an archive: the inner one's record, then the outer one's.
		"deep/x": {"extracted:deep", "nested:inner"},
	} {
		l := list
		if path == "deep/x" {
			l = append([]Extraction{{ID: "deep", Dest: "deep", ArchivePath: "outer/lib/deep.tar", CreatedAt: at(4)}}, list[0])
		}
		got := roles(provenanceOf(l, path))
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", path, got, want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: %v, want %v", path, got, want)
			}
		}
	}
}

// On PostgreSQL the harness's role records and reads extractions and an artifact's
// provenance (extractions is a runtime table, granted to it); a team's role cannot.
func TestExtractionsAsHarnessRole(t *testing.T) {
	p := newRLSPlane(t)
	ctx := t.Context()
	h := p.asHarness
	must(t, h.CreateSession(ctx, Session{ID: "s1", Agent: "helper", Owner: "carol"}))
	ex := Extraction{ID: "ex-1", SessionID: "s1", Dest: "src", ArchivePath: "src.tgz", ArchiveSHA256: "ab", Format: "tar.gz", Entries: 3, CreatedAt: time.UnixMilli(1000)}
	must(t, h.PutExtraction(ctx, ex))
	prov, err := h.ProvenanceOf(ctx, "s1", "src/a.txt")
	if err != nil || len(prov) != 1 || prov[0].Extraction != "ex-1" || prov[0].Role != ProvenanceExtracted {
		t.Fatalf("provenance %+v, %v", prov, err)
	}
	must(t, h.PutArtifact(ctx, Artifact{ID: "a1", SessionID: "s1", Path: "src/a.txt", SHA256: "cd", Classification: "untrusted",
		ExpiresAt: time.UnixMilli(2000), Provenance: prov, Content: []byte("x"), CreatedAt: time.UnixMilli(1500)}))
	arts, err := h.ListArtifacts(ctx, "s1")
	if err != nil || len(arts) != 1 || len(arts[0].Provenance) != 1 || arts[0].Provenance[0].Archive != "src.tgz" {
		t.Fatalf("artifacts %+v, %v", arts, err)
	}
	refused(t, p.asBob.DB(), "a team's", `SELECT * FROM extractions`)
}
