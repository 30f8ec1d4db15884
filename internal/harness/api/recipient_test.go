package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/scan"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// offerFiles stores a session of alice's agent "dl" (downloads on) with offered files,
// as offer_artifact records them (no sandbox needed to download an offer), by path:
// classification.
func offerFiles(t *testing.T, st *store.Store, files map[string]string) string {
	t.Helper()
	ctx := context.Background()
	harnesstest.AddAgent(t, st, "dl", "default", harnesstest.AgentSpec{"sandbox": harnesstest.Sandbox("default", 30, 60, 120), "model": script(text("ok"))})
	const sid = "s-recipients"
	must(t, st.CreateSession(ctx, store.Session{ID: sid, Agent: "dl", Owner: "alice"}))
	now := time.Now()
	i := 0
	for p, class := range files {
		i++
		content := []byte(p + " content\n")
		sum := sha256.Sum256(content)
		must(t, st.PutArtifact(ctx, store.Artifact{ID: "art-" + p, SessionID: sid, Path: p, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(content)),
			SourceEvent: int64(i), Classification: class, DetectedType: "text", Content: content, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}))
	}
	return sid
}

// policyFile is a loaded policy file of text.
func policyFile(t *testing.T, text string) *policy.Policy {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.json")
	must(t, os.WriteFile(p, []byte(text), 0o600))
	pol, err := policy.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

type listedFile struct {
	Path, Classification, Recipients string
	DetectedType                     string `json:"detected_type"`
	MayDownload                      bool   `json:"may_download"`
	Scan                             struct{ Verdict, Signature, Scanner string }
	Refusal                          *struct{ Code, Message string }
}

func (f *fixture) listed(user, sid string) map[string]listedFile {
	f.t.Helper()
	r := f.req("GET", "/api/v1/sessions/"+sid+"/files", user, nil)
	want(f.t, user+"'s listing", r, http.StatusOK, "")
	var body struct{ Files []listedFile }
	must(f.t, json.Unmarshal(r.body, &body))
	out := map[string]listedFile{}
	for _, lf := range body.Files {
		out[lf.Path] = lf
	}
	return out
}

func (f *fixture) audit() []map[string]any {
	f.t.Helper()
	r := f.req("GET", "/api/v1/admin/audit", "root", nil)
	want(f.t, "the audit log", r, http.StatusOK, "")
	var body struct{ Entries []map[string]any }
	must(f.t, json.Unmarshal(r.body, &body))
	return body.Entries
}

// Who downloads a confidential and a restricted file by default: the owner gets the
// confidential one; an admin reaches the session but gets neither (403 recipient,
// saying why and how to get a release); another user does not even see the session.
// A release by an admin lets the named user download that file (and see only it), is
// refused to anyone but an admin, and is in the audit log, as is every decision on
// those files. The listing says each file's verdicts, and why it is refused.
func TestDownloadRecipients(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	sid := offerFiles(t, f.st, map[string]string{"report.csv": "confidential", "plan.txt": "restricted", "notes.txt": "internal"})
	files := "/api/v1/sessions/" + sid + "/files"

	want(t, "the owner, confidential", f.req("GET", files+"/report.csv", "alice", nil), http.StatusOK, "")
	want(t, "the owner, internal", f.req("GET", files+"/notes.txt", "alice", nil), http.StatusOK, "")
	r := f.req("GET", files+"/plan.txt", "alice", nil)
	want(t, "the owner, restricted", r, http.StatusForbidden, api.CodeRecipient)
	if msg := r.errMessage(); !strings.Contains(msg, "plan.txt is classified restricted, which nobody may download until an admin releases it") ||
		!strings.Contains(msg, "trueforge-harness files release "+sid+" plan.txt --to alice") {
		t.Errorf("the owner's refusal: %q", msg)
	}
	r = f.req("GET", files+"/report.csv", "root", nil)
	want(t, "an admin, confidential", r, http.StatusForbidden, api.CodeRecipient)
	if msg := r.errMessage(); !strings.Contains(msg, "report.csv is classified confidential, which only the session's owner may download") {
		t.Errorf("the admin's refusal: %q", msg)
	}
	want(t, "an admin, restricted", f.req("GET", files+"/plan.txt", "root", nil), http.StatusForbidden, api.CodeRecipient)
	want(t, "an admin, internal", f.req("GET", files+"/notes.txt", "root", nil), http.StatusForbidden, api.CodeRecipient)
	want(t, "an admin, the workspace", f.req("GET", files+"/report.csv?workspace=1", "root", nil), http.StatusForbidden, api.CodeRecipient)
	for _, p := range []string{"/report.csv", "/plan.txt", "", "/notes.txt?workspace=1"} {
		want(t, "another user, "+p, f.req("GET", files+p, "bob", nil), http.StatusNotFound, api.CodeNotFound)
	}

	l := f.listed("alice", sid)
	if c := l["report.csv"]; !c.MayDownload || c.Refusal != nil || c.Classification != "confidential" || c.DetectedType != "text" ||
		c.Scan.Verdict != "off" || c.Recipients != "the session's owner" {
		t.Errorf("confidential, listed for the owner: %+v", c)
	}
	if c := l["plan.txt"]; c.MayDownload || c.Refusal == nil || c.Refusal.Code != api.CodeRecipient || c.Recipients != "nobody without an admin's release" ||
		!strings.Contains(c.Refusal.Message, "nobody may download until an admin releases it") {
		t.Errorf("restricted, listed for the owner: %+v", c)
	}
	if l := f.listed("root", sid); len(l) != 3 || l["report.csv"].MayDownload || l["plan.txt"].MayDownload {
		t.Errorf("listed for an admin: %+v", l)
	}

	// Releases: admins only, of an offered file, to a user who exists.
	release := files + "/plan.txt/release"
	want(t, "a release by the owner", f.req("POST", release, "alice", map[string]any{"to": "alice"}), http.StatusForbidden, api.CodeAdminOnly)
	want(t, "a release to nobody known", f.req("POST", release, "root", map[string]any{"to": "nobody"}), http.StatusUnprocessableEntity, api.CodeUnprocessable)
	want(t, "a release without to", f.req("POST", release, "root", map[string]any{"note": "x"}), http.StatusBadRequest, api.CodeBadJSON)
	want(t, "a release of a file never offered", f.req("POST", files+"/other.txt/release", "root", map[string]any{"to": "bob"}), http.StatusNotFound, api.CodeNotOffered)
	want(t, "a POST that is no release", f.req("POST", files+"/plan.txt", "root", map[string]any{"to": "bob"}), http.StatusMethodNotAllowed, api.CodeMethod)
	r = f.req("POST", release, "root", map[string]any{"to": "bob", "note": "for the review"})
	want(t, "a release to bob", r, http.StatusOK, "")
	if m := r.json(t); m["to"] != "bob" || m["by"] != "root" || m["path"] != "plan.txt" || m["classification"] != "restricted" || m["note"] != "for the review" {
		t.Errorf("the release: %v", m)
	}
	r = f.req("GET", files+"/plan.txt", "bob", nil)
	want(t, "bob, released", r, http.StatusOK, "")
	if string(r.body) != "plan.txt content\n" {
		t.Errorf("bob got %q", r.body)
	}
	if l := f.listed("bob", sid); len(l) != 1 || !l["plan.txt"].MayDownload {
		t.Errorf("listed for bob, with a release of one file: %+v", l)
	}
	want(t, "bob, the confidential file", f.req("GET", files+"/report.csv", "bob", nil), http.StatusNotFound, api.CodeNotFound)
	want(t, "bob, a file never offered", f.req("GET", files+"/other.txt", "bob", nil), http.StatusNotFound, api.CodeNotFound)
	want(t, "bob, the workspace", f.req("GET", files+"/plan.txt?workspace=1", "bob", nil), http.StatusNotFound, api.CodeNotFound)
	want(t, "the owner, released to bob only", f.req("GET", files+"/plan.txt", "alice", nil), http.StatusForbidden, api.CodeRecipient)
	want(t, "a release to everyone", f.req("POST", release, "root", map[string]any{"to": "*"}), http.StatusOK, "")
	want(t, "the owner, released to everyone", f.req("GET", files+"/plan.txt", "alice", nil), http.StatusOK, "")

	// The log, newest first: every decision on the confidential and restricted files
	// (none on the internal one) and the releases, with the file and what decided.
	var got []string
	for _, e := range f.audit() {
		got = append(got, e["actor"].(string)+" "+e["action"].(string)+" "+e["target"].(string))
	}
	plan, report := sid+"/plan.txt@sha256:", sid+"/report.csv@sha256:"
	wantLog := []string{"alice download.allow " + plan, "root download.release " + plan, "alice download.refuse " + plan,
		"bob download.refuse " + report, "bob download.allow " + plan, "root download.release " + plan,
		"root download.refuse " + plan, "root download.refuse " + report, "alice download.refuse " + plan, "alice download.allow " + report}
	if len(got) != len(wantLog) {
		t.Fatalf("the audit log: %q", got)
	}
	for i := range got {
		if !strings.HasPrefix(got[i], wantLog[i]) {
			t.Errorf("audit entry %d: %q; want %q...", i, got[i], wantLog[i])
		}
	}
	if d := f.audit()[4]["detail"]; !strings.Contains(d.(string), "decided by released to bob by root at ") {
		t.Errorf("bob's download: %v", d)
	}
}

// A download policy that names users and roles: an auditor reaches the confidential
// files of any session (and sees only those), admins download them; the listing's
// scan verdicts come from the stored verdicts by digest.
func TestDownloadPolicy(t *testing.T) {
	pol := policyFile(t, `{"default": "allow", "downloads": {"confidential": {"users": ["carol"], "roles": ["owner", "admin"]}}}`)
	f := newFixture(t, fixtureOpts{cfg: func(cfg *api.Config) {
		cfg.Policy = func() (*policy.Policy, error) { return pol, nil }
		cfg.Scanner = cleanScanner{}
	}})
	f.addUser("carol", false)
	sid := offerFiles(t, f.st, map[string]string{"report.csv": "confidential", "eicar.txt": "internal", "notes.txt": "internal"})
	files := "/api/v1/sessions/" + sid + "/files"
	ctx := context.Background()
	for _, a := range []struct {
		path  string
		clean bool
	}{{"report.csv", true}, {"eicar.txt", false}} {
		sum := sha256.Sum256([]byte(a.path + " content\n"))
		must(t, f.st.PutScanVerdict(ctx, store.ScanVerdict{SHA256: hex.EncodeToString(sum[:]), Clean: a.clean, Signature: map[bool]string{false: "Eicar-Test-Signature"}[a.clean],
			Scanner: "ClamAV 1.4.6", ScannedAt: time.Now()}))
	}

	for _, u := range []string{"carol", "root", "alice"} {
		want(t, u+", confidential", f.req("GET", files+"/report.csv", u, nil), http.StatusOK, "")
	}
	want(t, "bob, confidential", f.req("GET", files+"/report.csv", "bob", nil), http.StatusNotFound, api.CodeNotFound)
	want(t, "carol, internal", f.req("GET", files+"/notes.txt", "carol", nil), http.StatusNotFound, api.CodeNotFound)
	if l := f.listed("carol", sid); len(l) != 1 || !l["report.csv"].MayDownload || l["report.csv"].Recipients != "the session's owner, admins and users carol" {
		t.Errorf("listed for carol: %+v", l)
	}
	l := f.listed("alice", sid)
	if c := l["report.csv"]; c.Scan.Verdict != "clean" || c.Scan.Scanner != "ClamAV 1.4.6" || !c.MayDownload {
		t.Errorf("a clean file: %+v", c)
	}
	if c := l["eicar.txt"]; c.Scan.Verdict != "found" || c.Scan.Signature != "Eicar-Test-Signature" || c.MayDownload || c.Refusal.Code != api.CodeMalware {
		t.Errorf("malware: %+v", c)
	}
	if c := l["notes.txt"]; c.Scan.Verdict != "not_scanned" || !c.MayDownload {
		t.Errorf("not scanned yet: %+v", c)
	}
	want(t, "malware, downloaded", f.req("GET", files+"/eicar.txt", "alice", nil), http.StatusForbidden, api.CodeMalware)

	// A policy that cannot be read refuses downloads rather than guessing.
	broken := newFixture(t, fixtureOpts{st: f.st, noUsers: true, cfg: func(cfg *api.Config) {
		cfg.Policy = func() (*policy.Policy, error) { return nil, os.ErrNotExist }
	}})
	broken.tokens = f.tokens
	want(t, "with a broken policy", broken.req("GET", files+"/report.csv", "alice", nil), http.StatusInternalServerError, api.CodeInternal)
}

// cleanScanner finds nothing.
type cleanScanner struct{}

func (cleanScanner) Scan(context.Context, io.Reader) (scan.Verdict, error) {
	return scan.Verdict{Clean: true, Scanner: "test", At: time.Now()}, nil
}
