package main

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sessions"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// filesJSON is `files list ID -o json` (schema in the running-agents guide).
type filesJSON struct {
	Offered   []offeredFileJSON `json:"offered"`
	Workspace workspaceJSON     `json:"workspace"`
}

type offeredFileJSON struct {
	Path           string    `json:"path"`
	Size           int64     `json:"size"`
	SHA256         string    `json:"sha256"`
	Classification string    `json:"classification"`
	ExpiresAt      time.Time `json:"expires_at"`
	Snapshot       string    `json:"snapshot"`
	Sandbox        string    `json:"sandbox"`
	SourceEvent    int64     `json:"source_event"`
	Commands       []string  `json:"commands"`
	// ManifestDigest and SessionInstalls are the packages' lineage (supply-chain guide).
	ManifestDigest  string        `json:"manifest_digest"`
	SessionInstalls []packageJSON `json:"session_installs"`
	// Provenance is the archives the file came from (extract_archive), [] when none.
	Provenance []store.Provenance `json:"provenance"`
	// The checks a download by you meets (sessions.Verdicts, as the API lists them):
	// the type recorded at the offer, how it contradicts the name, the malware scan
	// (clean, found, not_scanned, off), and whether you may download it, else why not.
	DetectedType  string `json:"detected_type"`
	TypeMismatch  string `json:"type_mismatch,omitempty"`
	Scan          string `json:"scan"`
	ScanSignature string `json:"scan_signature,omitempty"`
	MayDownload   bool   `json:"may_download"`
	Refusal       string `json:"refusal,omitempty"`
}

// workspaceJSON is the session's sandbox workspace: listed only when the sandbox
// exists and is not archived (listing never provisions or resumes one); Reason says
// why not otherwise.
type workspaceJSON struct {
	Sandbox string              `json:"sandbox"` // "": none was ever provisioned
	State   string              `json:"state"`
	Listed  bool                `json:"listed"`
	Reason  string              `json:"reason"`
	Files   []workspaceFileJSON `json:"files"`
	// Omitted counts the entries past the first sandbox.DefaultListEntries (a lower
	// bound when OmittedAtLeast).
	Omitted        int  `json:"omitted"`
	OmittedAtLeast bool `json:"omitted_at_least"`
}

type workspaceFileJSON struct {
	// Path is for showing: a name's bytes that are not UTF-8 become U+FFFD in JSON.
	// PathEncoded is exact: each segment percent-encoded (url.PathEscape), so a script
	// gets the bytes to pass to `files get` back with any URL-decoding function.
	Path        string `json:"path"`
	PathEncoded string `json:"path_encoded"`
	Size        int64  `json:"size"`
	Mode        string `json:"mode"`
}

func listFiles(ctx context.Context, h *harness, s store.Session) (filesJSON, error) {
	doc := filesJSON{Offered: []offeredFileJSON{}, Workspace: workspaceJSON{Files: []workspaceFileJSON{}}}
	arts, err := h.store.ListArtifacts(ctx, s.ID)
	if err != nil {
		return doc, err
	}
	verdicts, err := h.verdicts(ctx, s, arts)
	if err != nil {
		return doc, err
	}
	for i, a := range arts {
		cmds := a.Commands
		if cmds == nil {
			cmds = []string{}
		}
		v := verdicts[i]
		f := offeredFileJSON{Path: a.Path, Size: a.Size, SHA256: a.SHA256, Classification: a.Classification,
			ExpiresAt: a.ExpiresAt.UTC(), Snapshot: a.SnapshotID, Sandbox: a.SandboxID, SourceEvent: a.SourceEvent, Commands: cmds,
			ManifestDigest: a.ManifestDigest, SessionInstalls: packagesOf(a.SessionInstalls), Provenance: nonNilProvenance(a.Provenance),
			DetectedType: v.Type, TypeMismatch: v.Mismatch, Scan: v.Scan.Verdict, ScanSignature: v.Scan.Signature, MayDownload: v.Refused == nil}
		if v.Refused != nil {
			f.Refusal = v.Refused.Error()
		}
		doc.Offered = append(doc.Offered, f)
	}
	ws := &doc.Workspace
	rec, err := sessions.Sandbox(ctx, h.store, s.ID)
	if errors.Is(err, sessions.ErrNoSandbox) {
		ws.Reason = "no sandbox was ever provisioned for this session"
		return doc, nil
	}
	if err != nil {
		return doc, err
	}
	ws.Sandbox, ws.State = rec.SandboxID, rec.State
	// One changing state is still tried: it may well be listed, and the reason says so
	// when it is not.
	if err := sessions.Readable(rec.State); errors.Is(err, sessions.ErrSandboxDeleted) || errors.Is(err, sessions.ErrSandboxArchived) {
		ws.Reason = "the sandbox is " + rec.State + "; its files are not listed without resuming it"
		return doc, nil
	}
	rt, err := sessions.Runtime(ctx, h.store, h.runtimes, rec)
	if err != nil {
		return doc, err
	}
	files, err := rt.ListFiles(ctx, rec.SandboxID, "", 0)
	if err != nil {
		ws.Reason = err.Error()
		return doc, nil //nolint:nilerr // the offered files are still listed; the reason says why the workspace is not
	}
	ws.Listed, ws.Omitted, ws.OmittedAtLeast = true, files.Omitted, files.OmittedAtLeast
	for _, f := range files.Entries {
		ws.Files = append(ws.Files, workspaceFileJSON{Path: f.Path, PathEncoded: encodePath(f.Path), Size: f.Size, Mode: f.Mode.String()})
	}
	return doc, nil
}

// encodePath is p with each segment percent-encoded: lossless, whatever bytes p holds.
func encodePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// nonNilProvenance is p, [] when nil: the JSON has an array either way.
func nonNilProvenance(p []store.Provenance) []store.Provenance {
	if p == nil {
		return []store.Provenance{}
	}
	return p
}

// verdicts says what a download of each of arts by the CLI's user would meet, as the
// API lists it (one function for both).
func (h *harness) verdicts(ctx context.Context, s store.Session, arts []store.Artifact) ([]sessions.FileVerdicts, error) {
	pol, err := h.loadPolicy()
	if err != nil {
		return nil, err
	}
	return sessions.Verdicts(ctx, h.store, s, arts, h.caller(), sessions.ListOptions{Policy: pol, Scanner: h.g.scanner != "",
		AllowExecutables: h.g.allowExecutables, Now: time.Now()})
}
