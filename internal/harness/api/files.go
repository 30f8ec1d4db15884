package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sessions"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/manifest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/termsafe"
)

// Downloads (GET /sessions/{id}/files/{path}) serve what the agent offered
// (offer_artifact): the bytes stored with the offer, their SHA-256 checked against the
// recorded digest before the first byte is sent, with the offer's provenance in headers.
// With ?workspace=1 a regular file of the session's sandbox is served instead (never a
// symlink, FIFO, device or directory; at most tools.MaxArtifactBytes), read without
// provisioning or resuming the sandbox; a workspace file that was offered must still be
// what was offered (else 409 digest_mismatch). Either needs the agent's
// sandbox.file_downloads (else 403).
//
// Who may download: the file's classification decides (sessions.CheckRecipient, by the
// operator's policy; 403 recipient otherwise, and the decision on a confidential or
// restricted file in the audit log). The session's owner reaches its files as before;
// an admin reaches any session's (to see what to release, and to download what the
// policy or a release lets admins have); another user reaches a session's files only
// when one of them is theirs to download, and then sees only those (a visitor: the
// others are 404, as a session not theirs is). A sandbox's workspace is its owner's.

// MaxDownloadBytes caps a download: the cap of an offered file.
const MaxDownloadBytes = tools.MaxArtifactBytes

// fileJSON is an offered file.
type fileJSON struct {
	Path           string    `json:"path"`
	Size           int64     `json:"size"`
	SHA256         string    `json:"sha256"`
	Classification string    `json:"classification"`
	ExpiresAt      time.Time `json:"expires_at"`
	Expired        bool      `json:"expired"`
	SnapshotID     string    `json:"snapshot_id"`
	SandboxID      string    `json:"sandbox_id"`
	SourceEvent    int64     `json:"source_event"`
	Commands       []string  `json:"commands"`
	// ManifestDigest and SessionInstalls are the packages' lineage (supply-chain guide).
	ManifestDigest  string             `json:"manifest_digest"`
	SessionInstalls []manifest.Package `json:"session_installs"`
	// Provenance is the archives the file came from (extract_archive), [] when none.
	Provenance []store.Provenance `json:"provenance"`
	OfferedAt  time.Time          `json:"offered_at"`
	URL        string             `json:"url"`
	// DetectedType is what the content is, recorded when it was offered ("" for a file
	// offered before types were recorded); TypeMismatch how that contradicts its name.
	DetectedType string   `json:"detected_type"`
	TypeMismatch string   `json:"type_mismatch,omitempty"`
	Scan         scanJSON `json:"scan"`
	// Recipients is who the classification lets download it; MayDownload whether the
	// caller may download it now, and Refusal, when not, the error the download would
	// answer (recipient, expired, executable or malware).
	Recipients  string `json:"recipients"`
	MayDownload bool   `json:"may_download"`
	Refusal     *Error `json:"refusal,omitempty"`
}

// scanJSON is the malware scan of an offered file, as far as it is known without
// scanning it (sessions.ScanState).
type scanJSON struct {
	Verdict   string `json:"verdict"` // clean, found, not_scanned (scanned at the first download), off
	Signature string `json:"signature,omitempty"`
	Scanner   string `json:"scanner,omitempty"`
}

// workspaceJSON lists a directory of the session's sandbox: its first
// sandbox.DefaultListEntries entries by path, and how many more it holds (Omitted; a
// lower bound when OmittedAtLeast).
type workspaceJSON struct {
	SandboxID      string          `json:"sandbox_id"`
	State          string          `json:"state"`
	Dir            string          `json:"dir"`
	Entries        []workspaceFile `json:"entries"`
	Omitted        int             `json:"omitted"`
	OmittedAtLeast bool            `json:"omitted_at_least"`
}

type workspaceFile struct {
	// Path is for showing: JSON strings are Unicode, so bytes of a name that are not
	// UTF-8 arrive as U+FFFD. URL is exact (every such byte percent-encoded): a regular
	// file downloads by it whatever its name.
	Path    string    `json:"path"`
	Type    string    `json:"type"` // file, dir, symlink, fifo, socket, device, other
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
	URL     string    `json:"url,omitempty"` // regular files only
}

// filesAccess is a session as a file route's caller reaches it.
type filesAccess struct {
	ss store.Session
	// visitor: the caller is neither the session's owner nor an admin, and reaches it
	// because a file of it is theirs to download; only those files are theirs to see.
	visitor bool
	owner   bool
	pol     *policy.Policy
}

// downloadableSession is the session named by the request as the caller reaches its
// files (sessions.FilesSession; a session not theirs to reach is 404 like a missing
// one), once downloadsAllowed: where every file route starts.
func (s *Server) downloadableSession(r *http.Request, c *caller) (filesAccess, error) {
	pol, err := s.downloadPolicy()
	if err != nil {
		return filesAccess{}, err
	}
	id := r.PathValue("id")
	ss, visitor, err := sessions.FilesSession(r.Context(), s.cfg.Store, pol, id, c.session())
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, sessions.ErrNotOwner) {
		return filesAccess{}, notFound("session " + quote(id))
	}
	if err == nil {
		err = s.downloadsAllowed(r, ss)
	}
	return filesAccess{ss: ss, visitor: visitor, owner: ss.Owner == c.user.Name, pol: pol}, err
}

// downloadPolicy is the operator's policy for downloads (nil: the defaults).
func (s *Server) downloadPolicy() (*policy.Policy, error) {
	if s.cfg.Policy == nil {
		return nil, nil
	}
	p, err := s.cfg.Policy()
	if err != nil {
		return nil, fmt.Errorf("reading the operator's policy, which says who may download what: %w", err)
	}
	return p, nil
}

// workspaceOwned refuses the workspace to anyone but the session's owner: what the
// sandbox holds was never offered, so no classification lets it go to anyone else.
func (fa filesAccess) workspaceOwned() error {
	if fa.owner {
		return nil
	}
	if fa.visitor {
		return notFound("the workspace of session " + quote(fa.ss.ID))
	}
	return errorf(http.StatusForbidden, CodeRecipient, "the workspace of session %s is its owner's (%s): others download only the files offered in it", fa.ss.ID, fa.ss.Owner)
}

// downloadsAllowed refuses when the session's agent does not offer downloads (or is no
// longer published, which leaves nothing to say it does).
func (s *Server) downloadsAllowed(r *http.Request, ss store.Session) error {
	row, err := s.cfg.Store.GetAgent(r.Context(), ss.Agent)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusForbidden, CodeDownloadsOff, "the session's agent %q is no longer published, so nothing says it allows downloads", ss.Agent)
	}
	if err != nil {
		return err
	}
	spec, err := agentspec.Decode(row.Spec)
	if err != nil {
		return fmt.Errorf("agent %q: %w", ss.Agent, err)
	}
	if !spec.Sandbox.Enabled || !spec.Sandbox.FileDownloads {
		return errorf(http.StatusForbidden, CodeDownloadsOff, "agent %q does not allow file downloads (its sandbox.file_downloads is false)", ss.Agent)
	}
	return nil
}

// listFiles lists the files offered in a session (the newest offer of each path) and,
// with ?workspace=1, a directory (?dir=, default the workspace) of its sandbox.
// Each offered file says the verdicts its download would meet (sessions.Verdicts):
// type, scan, classification, and whether the caller may download it, and why not.
func (s *Server) listFiles(w http.ResponseWriter, r *http.Request, c *caller) error {
	fa, err := s.downloadableSession(r, c)
	if err != nil {
		return err
	}
	if workspaceAsked(r) {
		if err := fa.workspaceOwned(); err != nil {
			return err
		}
	}
	ctx := r.Context()
	arts, err := s.cfg.Store.ListArtifacts(ctx, fa.ss.ID)
	if err != nil {
		return err
	}
	arts = newestOffers(arts)
	now := s.cfg.Now()
	vs, err := sessions.Verdicts(ctx, s.cfg.Store, fa.ss, arts, c.session(),
		sessions.ListOptions{Policy: fa.pol, Scanner: s.cfg.Scanner != nil, AllowExecutables: s.cfg.AllowExecutables, Now: now})
	if err != nil {
		return err
	}
	out := []fileJSON{}
	for i, a := range arts {
		if fa.visitor && !vs[i].Recipient.Allowed {
			continue
		}
		out = append(out, fileOf(fa.ss.ID, a, vs[i], now))
	}
	resp := map[string]any{"files": out}
	if workspaceAsked(r) {
		ws, err := s.listWorkspace(r, fa.ss)
		if err != nil {
			return err
		}
		resp["workspace"] = ws
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// newestOffers keeps the newest offer of each path of arts, in the order the paths were
// first offered (the offering tool call's seq: offers made in one millisecond have no
// other order).
func newestOffers(arts []store.Artifact) []store.Artifact {
	sort.SliceStable(arts, func(i, j int) bool { return arts[i].SourceEvent < arts[j].SourceEvent })
	newest := map[string]int{}
	var out []store.Artifact
	for _, a := range arts { // oldest first: a later offer of a path replaces an earlier one
		if i, ok := newest[a.Path]; ok {
			out[i] = a
			continue
		}
		newest[a.Path] = len(out)
		out = append(out, a)
	}
	return out
}

// fileOf is offered file a of session sessionID as listed, with its verdicts v.
func fileOf(sessionID string, a store.Artifact, v sessions.FileVerdicts, now time.Time) fileJSON {
	f := fileJSON{Path: a.Path, Size: a.Size, SHA256: a.SHA256, Classification: a.Classification, ExpiresAt: a.ExpiresAt.UTC(),
		Expired: !now.Before(a.ExpiresAt), SnapshotID: a.SnapshotID, SandboxID: a.SandboxID, SourceEvent: a.SourceEvent,
		Commands: a.Commands, ManifestDigest: a.ManifestDigest, SessionInstalls: a.SessionInstalls, Provenance: a.Provenance, OfferedAt: a.CreatedAt.UTC(), URL: fileURL(sessionID, a.Path),
		DetectedType: v.Type, TypeMismatch: v.Mismatch, Scan: scanJSON{Verdict: v.Scan.Verdict, Signature: v.Scan.Signature, Scanner: v.Scan.Scanner},
		Recipients: v.Recipient.Recipients.String(), MayDownload: v.Refused == nil, Refusal: refusalOf(v.Refused)}
	if f.Commands == nil {
		f.Commands = []string{}
	}
	if f.SessionInstalls == nil {
		f.SessionInstalls = []manifest.Package{}
	}
	if f.Provenance == nil {
		f.Provenance = []store.Provenance{}
	}
	return f
}

// refusalOf is a listing's refusal (sessions.FileVerdicts.Refused) as the error its
// download would answer; nil for none.
func refusalOf(err error) *Error {
	code := ""
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sessions.ErrOfferExpired):
		code = CodeExpired
	case errors.Is(err, sessions.ErrRecipient):
		code = CodeRecipient
	case errors.Is(err, sessions.ErrExecutable):
		code = CodeExecutable
	case errors.Is(err, sessions.ErrMalware):
		code = CodeMalware
	}
	return &Error{Status: http.StatusForbidden, Code: code, Message: err.Error()}
}

func workspaceAsked(r *http.Request) bool {
	v := r.URL.Query().Get("workspace")
	return v != "" && v != "0" && v != "false"
}

// fileURL is where a file of a session downloads from.
func fileURL(sessionID, p string) string {
	parts := strings.Split(p, "/")
	for i, x := range parts {
		parts[i] = url.PathEscape(x)
	}
	return "/api/v1/sessions/" + sessionID + "/files/" + strings.Join(parts, "/")
}

// sandboxRuntime is the session's sandbox record and runtime, for reading its files: a
// sandbox that is gone or archived is not read (reading never provisions or resumes).
func (s *Server) sandboxRuntime(r *http.Request, ss store.Session) (store.SessionSandbox, sandbox.Runtime, error) {
	ctx := r.Context()
	rec, err := sessions.Sandbox(ctx, s.cfg.Store, ss.ID)
	if errors.Is(err, sessions.ErrNoSandbox) {
		return rec, nil, errorf(http.StatusNotFound, CodeNoSandbox, "session %s has no sandbox: no turn has needed one yet", ss.ID)
	}
	if err != nil {
		return rec, nil, err
	}
	switch err := sessions.Readable(rec.State); {
	case errors.Is(err, sessions.ErrSandboxDeleted):
		return rec, nil, errorf(http.StatusNotFound, CodeNoSandbox, "the sandbox of session %s was deleted after being idle; its files are gone (offered files stay downloadable until they expire)", ss.ID)
	case errors.Is(err, sessions.ErrSandboxArchived):
		return rec, nil, errorf(http.StatusConflict, CodeSandboxArchived, "the sandbox of session %s is archived; its files are read again once a turn resumes it", ss.ID)
	case err != nil:
		return rec, nil, errorf(http.StatusConflict, CodeNoSandbox, "the sandbox of session %s is %s; try again after the next turn", ss.ID, rec.State)
	}
	if s.cfg.Runtimes == nil {
		return rec, nil, errorf(http.StatusNotFound, CodeNoSandbox, "this harness reads no sandboxes")
	}
	rt, err := sessions.Runtime(ctx, s.cfg.Store, s.cfg.Runtimes, rec)
	return rec, rt, err
}

func (s *Server) listWorkspace(r *http.Request, ss store.Session) (*workspaceJSON, error) {
	rec, rt, err := s.sandboxRuntime(r, ss)
	if err != nil {
		return nil, err
	}
	dir := r.URL.Query().Get("dir")
	if dir != "" {
		if dir, err = cleanFilePath(dir); err != nil {
			return nil, err
		}
	}
	list, err := rt.ListFiles(r.Context(), rec.SandboxID, dir, 0)
	if errors.Is(err, sandbox.ErrNotFound) {
		return nil, notFound("directory " + quote(dir) + " of the workspace")
	}
	if err != nil {
		return nil, errorf(http.StatusUnprocessableEntity, CodeNotRegular, "listing %q in sandbox %s: %v", dir, rec.SandboxID, err)
	}
	ws := &workspaceJSON{SandboxID: rec.SandboxID, State: rec.State, Dir: dir, Entries: []workspaceFile{},
		Omitted: list.Omitted, OmittedAtLeast: list.OmittedAtLeast}
	for _, f := range list.Entries {
		e := workspaceFile{Path: f.Path, Type: sandbox.FileType(f.Mode), Size: f.Size, ModTime: f.ModTime.UTC()}
		if f.Mode.IsRegular() {
			e.URL = fileURL(ss.ID, f.Path) + "?workspace=1"
		}
		ws.Entries = append(ws.Entries, e)
	}
	return ws, nil
}

// cleanFilePath is a workspace-relative path as artifacts are recorded (tools.CleanPath),
// refusing one that leaves the workspace or names it.
func cleanFilePath(p string) (string, error) {
	if strings.ContainsRune(p, 0) || strings.Contains(p, `\`) {
		return "", errorf(http.StatusBadRequest, CodeBadRequest, "path %q holds a NUL or a backslash", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", errorf(http.StatusBadRequest, CodeBadRequest, "path %q leaves the workspace (..)", p)
		}
	}
	c := tools.CleanPath(p)
	if c == "" || c == "." {
		return "", errorf(http.StatusBadRequest, CodeBadRequest, "name a file: the path is empty")
	}
	return c, nil
}

// getFile downloads an offered file, or with ?workspace=1 a regular workspace file.
func (s *Server) getFile(w http.ResponseWriter, r *http.Request, c *caller) error {
	fa, err := s.downloadableSession(r, c)
	if err != nil {
		return err
	}
	ss := fa.ss
	p, err := cleanFilePath(r.PathValue("path"))
	if err != nil {
		return err
	}
	ctx := r.Context()
	a, err := s.cfg.Store.GetArtifact(ctx, ss.ID, p)
	offered := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if workspaceAsked(r) {
		if err := fa.workspaceOwned(); err != nil {
			return err
		}
		// A path that was offered keeps its classification (and its releases) when read
		// from the workspace; one never offered has the default.
		wa := a
		if !offered {
			wa = store.Artifact{SessionID: ss.ID, Path: p, Classification: tools.DefaultClassfication}
		}
		if err := s.checkRecipient(r, fa, c, wa); err != nil {
			return err
		}
		return s.getWorkspaceFile(w, r, ss, p, offered, a)
	}
	if !offered && fa.visitor {
		return notFound("file " + quote(p) + " of session " + quote(ss.ID))
	}
	if !offered {
		return errorf(http.StatusNotFound, CodeNotOffered, "%s was not offered for download in session %s (ask with ?workspace=1 for a file of the sandbox)", p, ss.ID)
	}
	sum, err := sessions.CheckOffer(a, s.cfg.Now(), MaxDownloadBytes)
	switch {
	case errors.Is(err, sessions.ErrOfferExpired):
		return errorf(http.StatusGone, CodeExpired, "the offer of %s expired at %s", p, a.ExpiresAt.UTC().Format(time.RFC3339))
	case errors.Is(err, sandbox.ErrTooLarge):
		return errorf(http.StatusUnprocessableEntity, CodeFileTooLarge, "%s holds %d bytes, over the download cap of %d", p, len(a.Content), MaxDownloadBytes)
	case errors.Is(err, sessions.ErrDigestMismatch):
		s.log.Warn("an offered file does not match its recorded digest", "session", ss.ID, "path", p, "recorded", a.SHA256)
		return errorf(http.StatusConflict, CodeDigestMismatch, "%s no longer matches the sha256 recorded when it was offered (%s): refusing to hand it out", p, a.SHA256)
	case err != nil:
		return err
	}
	if err := s.checkRecipient(r, fa, c, a); err != nil {
		return err
	}
	prov := provenance{offered: true, classification: a.Classification, snapshot: a.SnapshotID, sourceEvent: a.SourceEvent, expires: a.ExpiresAt}
	if prov.fileType, err = s.checkType(ss, p, a.SHA256, a.Content); err != nil {
		return err
	}
	if prov.scan, err = s.checkScan(r, ss, p, true, a.SHA256, a.Content); err != nil {
		return err
	}
	s.sendFile(w, p, a.Content, sum, prov)
	return nil
}

// checkRecipient refuses the caller a file its classification does not let them have
// (sessions.CheckRecipient, which records the decision on a confidential or restricted
// file in the audit log): 403 recipient saying why and how to get it released, or, for
// a visitor, 404 as a file that is not theirs to see.
func (s *Server) checkRecipient(r *http.Request, fa filesAccess, c *caller, a store.Artifact) error {
	_, err := sessions.CheckRecipient(r.Context(), s.cfg.Store, fa.pol, fa.ss, a, c.session())
	switch {
	case errors.Is(err, sessions.ErrRecipient) && fa.visitor:
		return notFound("file " + quote(a.Path) + " of session " + quote(fa.ss.ID))
	case errors.Is(err, sessions.ErrRecipient):
		s.log.Info("a download was refused: not a recipient of its classification", "session", fa.ss.ID, "path", a.Path,
			"classification", a.Classification, "user", c.user.Name)
		return errorf(http.StatusForbidden, CodeRecipient, "%v", err)
	}
	return err
}

// checkType says what content, downloaded as p, is (sessions.CheckType) for the
// X-Trueforge-Type header, and refuses an executable, or an archive that may hold one,
// with 403 executable unless the operator allows executable downloads. What the
// content is is kept by digest (sum, hex), so a file downloaded again is not read again.
func (s *Server) checkType(ss store.Session, p, sum string, content []byte) (string, error) {
	c, err := s.types.Check(p, sum, content, s.cfg.AllowExecutables)
	if errors.Is(err, sessions.ErrExecutable) {
		s.log.Warn("a download was refused: an executable output", "session", ss.ID, "path", p, "type", c.Header())
		return "", errorf(http.StatusForbidden, CodeExecutable, "%v", err)
	}
	return c.Header(), err
}

// checkScan scans content (whose sha256 is sum) before its download when a scanner is
// configured (sessions.CheckScan), and answers how the download headers describe the
// verdict ("" when nothing was scanned). A positive verdict is 403 malware, recorded in
// the session's log (once per digest); a scanner without a verdict is 503
// scanner_unavailable, or with ScannerFailOpen a download that goes on, logged.
func (s *Server) checkScan(r *http.Request, ss store.Session, p string, offered bool, sum string, content []byte) (string, error) {
	ctx := r.Context()
	v, err := sessions.CheckScan(ctx, s.cfg.Store, s.cfg.Scanner, s.cfg.ScannerFailOpen, sum, content)
	switch {
	case errors.Is(err, sessions.ErrMalware):
		s.log.Warn("a download was blocked: the malware scanner found malware", "session", ss.ID, "path", p, "sha256", sum,
			"signature", v.Signature, "scanner", v.Scanner)
		if err := sessions.RecordMalware(ctx, s.cfg.Store, ss.ID, p, offered, v); err != nil {
			s.log.Error("recording malware_found", "session", ss.ID, "path", p, "err", err)
		}
		return "", errorf(http.StatusForbidden, CodeMalware, "%s was blocked: the malware scanner found %s", p, v.Signature)
	case errors.Is(err, sessions.ErrScanUnavailable):
		s.log.Error("a download was refused: the malware scanner gave no verdict", "session", ss.ID, "path", p, "sha256", sum, "err", err)
		return "", errorf(http.StatusServiceUnavailable, CodeScannerDown, "%s was not handed out: it could not be scanned for malware (%v); try again later", p, err)
	case err != nil:
		return "", err
	case s.cfg.Scanner == nil:
		return "", nil
	case v.Scanner == "":
		s.log.Warn("a file was downloaded unscanned: the malware scanner gave no verdict and the harness fails open", "session", ss.ID, "path", p, "sha256", sum)
		return "", nil
	}
	return "clean (" + v.Scanner + ")", nil
}

// getWorkspaceFile serves a regular file of the session's sandbox; an offered path must
// still hold what was offered.
func (s *Server) getWorkspaceFile(w http.ResponseWriter, r *http.Request, ss store.Session, p string, offered bool, a store.Artifact) error {
	rec, rt, err := s.sandboxRuntime(r, ss)
	if err != nil {
		return err
	}
	ctx := r.Context()
	fi, err := rt.StatFile(ctx, rec.SandboxID, p)
	if errors.Is(err, sandbox.ErrNotFound) {
		return notFound("file " + quote(p) + " of the workspace")
	}
	if errors.Is(err, sandbox.ErrNotRegular) {
		return errorf(http.StatusUnprocessableEntity, CodeNotRegular, "%s: %v", p, err)
	}
	if err != nil {
		return errorf(http.StatusBadRequest, CodeBadRequest, "%s: %v", p, err)
	}
	if !fi.Mode.IsRegular() {
		return errorf(http.StatusUnprocessableEntity, CodeNotRegular, "%s is a %s, not a regular file: only regular files are downloaded, and a symlink is never followed", p, describeType(fi.Mode))
	}
	if fi.Size > MaxDownloadBytes {
		return errorf(http.StatusUnprocessableEntity, CodeFileTooLarge, "%s holds %d bytes, over the download cap of %d", p, fi.Size, MaxDownloadBytes)
	}
	data, err := rt.ReadFile(ctx, rec.SandboxID, p, MaxDownloadBytes)
	switch {
	case errors.Is(err, sandbox.ErrTooLarge):
		return errorf(http.StatusUnprocessableEntity, CodeFileTooLarge, "%s grew over the download cap of %d bytes", p, MaxDownloadBytes)
	case errors.Is(err, sandbox.ErrNotFound):
		return notFound("file " + quote(p) + " of the workspace")
	case errors.Is(err, sandbox.ErrNotRegular):
		// Swapped for a symlink (or a FIFO...) since the StatFile above: the sandbox's
		// doing, refused as the same request would be now.
		return errorf(http.StatusUnprocessableEntity, CodeNotRegular, "%s is not a regular file (any more): only regular files are downloaded, and a symlink is never followed: %v", p, err)
	case err != nil:
		return fmt.Errorf("reading %s from sandbox %s: %w", p, rec.SandboxID, err)
	}
	sum := sha256.Sum256(data)
	prov := provenance{classification: tools.DefaultClassfication, snapshot: rec.SnapshotID}
	if offered {
		if got := hex.EncodeToString(sum[:]); got != a.SHA256 {
			return errorf(http.StatusConflict, CodeDigestMismatch, "%s changed in the workspace after it was offered (offered with sha256 %s at %s, now %s): "+
				"download the offered copy (without ?workspace=1), or ask the agent to offer it again", p, a.SHA256, a.CreatedAt.UTC().Format(time.RFC3339), got)
		}
		prov = provenance{offered: true, classification: a.Classification, snapshot: a.SnapshotID, sourceEvent: a.SourceEvent, expires: a.ExpiresAt}
	}
	if prov.fileType, err = s.checkType(ss, p, hex.EncodeToString(sum[:]), data); err != nil {
		return err
	}
	if prov.scan, err = s.checkScan(r, ss, p, offered, hex.EncodeToString(sum[:]), data); err != nil {
		return err
	}
	s.sendFile(w, p, data, sum, prov)
	return nil
}

func describeType(m fs.FileMode) string {
	switch t := sandbox.FileType(m); t {
	case "dir":
		return "directory"
	case "fifo":
		return "named pipe (FIFO)"
	default:
		return t
	}
}

// provenance is what the download headers say about where a file came from.
type provenance struct {
	offered        bool
	classification string
	snapshot       string
	sourceEvent    int64
	expires        time.Time
	// scan is the malware scanner's verdict ("clean (ClamAV ...)"), "" when unscanned.
	scan string
	// fileType is what the content is (sessions.TypeCheck.Header).
	fileType string
}

// sendFile answers a download: an attachment with its digest and provenance headers.
func (s *Server) sendFile(w http.ResponseWriter, p string, data []byte, sum [32]byte, prov provenance) {
	h := w.Header()
	b64 := base64.StdEncoding.EncodeToString(sum[:])
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("Content-Disposition", contentDisposition(path.Base(p)))
	h.Set("Cache-Control", "private, no-store")
	h.Set("Digest", "sha-256="+b64)
	h.Set("Repr-Digest", "sha-256=:"+b64+":")
	h.Set("X-Trueforge-SHA256", hex.EncodeToString(sum[:]))
	h.Set("X-Trueforge-Offered", strconv.FormatBool(prov.offered))
	h.Set("X-Trueforge-Classification", prov.classification)
	if prov.snapshot != "" {
		h.Set("X-Trueforge-Snapshot", prov.snapshot)
	}
	if prov.sourceEvent > 0 {
		h.Set("X-Trueforge-Source-Event", strconv.FormatInt(prov.sourceEvent, 10))
	}
	if !prov.expires.IsZero() {
		h.Set("X-Trueforge-Expires", prov.expires.UTC().Format(time.RFC3339))
	}
	if prov.scan != "" {
		h.Set("X-Trueforge-Scan", prov.scan)
	}
	if prov.fileType != "" {
		h.Set("X-Trueforge-Type", prov.fileType)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// contentDisposition names the file for saving: an ASCII fallback and the UTF-8 name
// (RFC 6266), never anything a header could be split with. A name is the sandbox's
// choice: in both forms, a character termsafe would escape on a terminal (controls,
// bidi overrides such as U+202E that show "evil\u202etxt.exe" as "evilexe.txt", other
// invisible format characters) and invalid UTF-8 become '_', as they would mislead
// whoever saves or opens the file.
func contentDisposition(name string) string {
	name = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || termsafe.Unsafe(r, false) {
			return '_'
		}
		return r
	}, strings.ToValidUTF8(name, "_"))
	ascii := strings.Map(func(r rune) rune {
		if r > 0x7e || r == '"' || r == '\\' || r == ';' {
			return '_'
		}
		return r
	}, name)
	return fmt.Sprintf(`attachment; filename="%s"; filename*=UTF-8''%s`, ascii, url.PathEscape(name))
}
