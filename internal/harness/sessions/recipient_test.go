package sessions_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sessions"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

func loadPolicy(t *testing.T, text string) *policy.Policy {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// offered stores session s1 of alice with one offered file per classification, named
// for it ("confidential.txt"), and returns them by classification.
func offered(t *testing.T, st *store.Store, now time.Time) (store.Session, map[string]store.Artifact) {
	t.Helper()
	ctx := context.Background()
	ss := store.Session{ID: "s1", Agent: "a", Owner: "alice"}
	if err := st.CreateSession(ctx, ss); err != nil {
		t.Fatal(err)
	}
	arts := map[string]store.Artifact{}
	for _, c := range policy.Classifications {
		content := []byte(c + " data")
		a := store.Artifact{ID: "art-" + c, SessionID: ss.ID, Path: c + ".txt", SHA256: digest(content), Size: int64(len(content)),
			Classification: c, DetectedType: "text", Content: content, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		if err := st.PutArtifact(ctx, a); err != nil {
			t.Fatal(err)
		}
		arts[c] = a
	}
	return ss, arts
}

// Each classification for each kind of caller (the session's owner, an admin, another
// user, a user a download rule names), by default and under a policy, then with
// releases; a refusal is ErrRecipient saying the classification, who may download and
// how to get a release; the decisions on confidential and restricted files, and only
// those, are in the audit log with the rule that decided.
func TestCheckRecipient(t *testing.T) {
	st := storetest.Open(t, filepath.Join(t.TempDir(), "cp.db"))
	ctx := context.Background()
	now := time.Now()
	ss, arts := offered(t, st, now)
	owner, admin := sessions.Caller{Name: "alice"}, sessions.Caller{Name: "root", Admin: true}
	other, auditor := sessions.Caller{Name: "bob"}, sessions.Caller{Name: "auditor"}
	pol := loadPolicy(t, `{"default": "allow", "downloads": {
	  "internal": {"roles": ["any"]},
	  "public": {"roles": ["owner", "admin"]},
	  "confidential": {"users": ["auditor"], "roles": ["owner"]}
	}}`)
	type row struct{ owner, admin, other, auditor bool }
	for _, c := range []struct {
		pol  *policy.Policy
		want map[string]row
	}{
		{nil, map[string]row{
			policy.ClassUntrusted: {owner: true}, policy.ClassInternal: {owner: true}, policy.ClassPublic: {owner: true},
			policy.ClassConfidential: {owner: true}, policy.ClassRestricted: {},
		}},
		{pol, map[string]row{
			policy.ClassUntrusted: {owner: true}, policy.ClassInternal: {owner: true, admin: true},
			policy.ClassPublic: {owner: true, admin: true}, policy.ClassConfidential: {owner: true, auditor: true}, policy.ClassRestricted: {},
		}},
	} {
		for _, class := range policy.Classifications { // in order: the log's last entry is known
			w := c.want[class]
			for _, who := range []struct {
				c    sessions.Caller
				want bool
			}{{owner, w.owner}, {admin, w.admin}, {other, w.other}, {auditor, w.auditor}} {
				v, err := sessions.CheckRecipient(ctx, st, c.pol, ss, arts[class], who.c)
				if v.Allowed != who.want || (err == nil) != who.want || v.Classification != class {
					t.Fatalf("%v: %s for %s: %+v, %v; want allowed %v", c.pol, class, who.c.Name, v, err, who.want)
				}
				if err != nil && (!errors.Is(err, sessions.ErrRecipient) || !strings.Contains(err.Error(), class+".txt is classified "+class+", which ") ||
					!strings.Contains(err.Error(), "trueforge-harness files release s1 "+class+".txt --to "+who.c.Name)) {
					t.Fatalf("%s for %s: %v", class, who.c.Name, err)
				}
			}
		}
	}
	// 2 policies x 4 callers on confidential and restricted: 16 decisions, 3 allowed.
	entries, err := st.AuditLog(ctx, 0, 100)
	if err != nil || len(entries) != 16 {
		t.Fatalf("%d audit entries, %v; want 16", len(entries), err)
	}
	allowed := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Target, "s1/confidential.txt@sha256:"+arts[policy.ClassConfidential].SHA256) && !strings.HasPrefix(e.Target, "s1/restricted.txt@sha256:") {
			t.Errorf("audit target %q", e.Target)
		}
		if e.Action == sessions.AuditDownloadAllow {
			allowed++
		}
	}
	if allowed != 3 {
		t.Errorf("%d allowed downloads in the log; want 3 (the owner twice and the auditor on confidential)", allowed)
	}
	refused := entries[0] // the newest: the auditor on restricted, under the policy
	if refused.Action != sessions.AuditDownloadRefuse || refused.Actor != "auditor" ||
		refused.Detail != "classified restricted, session of alice; decided by the default for restricted: nobody without an admin's release; no release to auditor" {
		t.Errorf("the last entry: %+v", refused)
	}

	// A release to bob lets bob (and only bob) download that offer; one to everyone lets
	// everyone who may see the session, not a stranger.
	restricted := arts[policy.ClassRestricted]
	if err := sessions.Release(ctx, st, ss, restricted, "bob", "root", "for the review", now); err != nil {
		t.Fatal(err)
	}
	for _, who := range []struct {
		c    sessions.Caller
		want bool
	}{{other, true}, {owner, false}, {admin, false}} {
		if v, err := sessions.CheckRecipient(ctx, st, nil, ss, restricted, who.c); v.Allowed != who.want || (who.want && (v.Release == nil || v.Release.To != "bob")) {
			t.Errorf("restricted released to bob, for %s: %+v, %v", who.c.Name, v, err)
		}
	}
	if err := sessions.Release(ctx, st, ss, restricted, store.ReleaseToAll, "root", "", now); err != nil {
		t.Fatal(err)
	}
	for _, who := range []struct {
		c    sessions.Caller
		want bool
	}{{owner, true}, {admin, true}, {auditor, false}} {
		if v, _ := sessions.CheckRecipient(ctx, st, nil, ss, restricted, who.c); v.Allowed != who.want {
			t.Errorf("restricted released to everyone, for %s: %+v", who.c.Name, v)
		}
	}
	entries, _ = st.AuditLog(ctx, 0, 100)
	var releases []store.AuditEntry
	for _, e := range entries {
		if e.Action == sessions.AuditRelease {
			releases = append(releases, e)
		}
	}
	if len(releases) != 2 || releases[1].Actor != "root" || releases[1].Target != "s1/restricted.txt@sha256:"+restricted.SHA256 ||
		releases[1].Detail != "released to bob; classified restricted, session of alice; note: for the review" {
		t.Errorf("releases in the audit log: %+v", releases)
	}
	if entries[0].Action != sessions.AuditDownloadRefuse || entries[0].Actor != "auditor" || entries[1].Detail !=
		"classified restricted, session of alice; decided by released to everyone who may see the session by root at "+now.UTC().Format(time.RFC3339) {
		t.Errorf("the last decisions: %+v", entries[:2])
	}
}

// The files of another user's session are reachable for an admin, for a user a
// download rule names or a release names, and for nobody else (ErrNotOwner).
func TestFilesSession(t *testing.T) {
	st := storetest.Open(t, filepath.Join(t.TempDir(), "cp.db"))
	ctx := context.Background()
	ss, arts := offered(t, st, time.Now())
	pol := loadPolicy(t, `{"default": "allow", "downloads": {"confidential": {"users": ["auditor"], "roles": ["owner"]}}}`)
	for _, c := range []struct {
		c       sessions.Caller
		pol     *policy.Policy
		visitor bool
		err     error
	}{
		{sessions.Caller{Name: "alice"}, nil, false, nil},
		{sessions.Caller{Name: "root", Admin: true}, nil, false, nil},
		{sessions.Caller{Name: "bob"}, nil, false, sessions.ErrNotOwner},
		{sessions.Caller{Name: "auditor"}, nil, false, sessions.ErrNotOwner},
		{sessions.Caller{Name: "auditor"}, pol, true, nil},
	} {
		got, visitor, err := sessions.FilesSession(ctx, st, c.pol, ss.ID, c.c)
		if visitor != c.visitor || !errors.Is(err, c.err) || (err == nil && got.ID != ss.ID) || (err != nil && got.ID != "") {
			t.Errorf("%s (policy %v): %+v, visitor %v, %v", c.c.Name, c.pol, got, visitor, err)
		}
	}
	if err := sessions.Release(ctx, st, ss, arts[policy.ClassRestricted], "bob", "root", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, visitor, err := sessions.FilesSession(ctx, st, nil, ss.ID, sessions.Caller{Name: "bob"}); !visitor || err != nil {
		t.Errorf("bob after a release: visitor %v, %v", visitor, err)
	}
}

// A listing's verdicts: the recorded type and its contradiction of the name, the scan
// state by digest, and the first refusal a download would meet.
func TestVerdicts(t *testing.T) {
	st := storetest.Open(t, filepath.Join(t.TempDir(), "cp.db"))
	ctx := context.Background()
	now := time.Now()
	ss, arts := offered(t, st, now)
	exe := store.Artifact{ID: "exe", SessionID: ss.ID, Path: "report.pdf", SHA256: digest([]byte("elf")), Classification: policy.ClassInternal,
		DetectedType: "elf", Content: []byte("elf"), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	old := store.Artifact{ID: "old", SessionID: ss.ID, Path: "old.txt", SHA256: digest([]byte("old")), Classification: policy.ClassUntrusted,
		Content: []byte("old"), CreatedAt: now, ExpiresAt: now.Add(-time.Minute)}
	for _, a := range []store.Artifact{exe, old} {
		if err := st.PutArtifact(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.PutScanVerdict(ctx, store.ScanVerdict{SHA256: arts[policy.ClassPublic].SHA256, Signature: "Eicar-Test-Signature", Scanner: "ClamAV 1.4", ScannedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutScanVerdict(ctx, store.ScanVerdict{SHA256: arts[policy.ClassInternal].SHA256, Clean: true, Scanner: "ClamAV 1.4", ScannedAt: now}); err != nil {
		t.Fatal(err)
	}
	list := []store.Artifact{arts[policy.ClassInternal], arts[policy.ClassPublic], arts[policy.ClassRestricted], arts[policy.ClassUntrusted], exe, old}
	vs, err := sessions.Verdicts(ctx, st, ss, list, sessions.Caller{Name: "alice"}, sessions.ListOptions{Scanner: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []struct {
		scan    string
		refused error
	}{
		{sessions.ScanClean, nil}, {sessions.ScanFound, sessions.ErrMalware}, {sessions.ScanPending, sessions.ErrRecipient},
		{sessions.ScanPending, nil}, {sessions.ScanPending, sessions.ErrExecutable}, {sessions.ScanPending, sessions.ErrOfferExpired},
	} {
		if v := vs[i]; v.Scan.Verdict != w.scan || !errors.Is(v.Refused, w.refused) || (w.refused == nil) != (v.Refused == nil) {
			t.Errorf("%s: %+v; want scan %s, refused %v", list[i].Path, v, w.scan, w.refused)
		}
	}
	if v := vs[4]; v.Type != "elf" || v.Mismatch != "named .pdf but its content is elf" || v.Refused.Error() != "report.pdf is an executable (elf): "+sessions.ErrExecutable.Error() {
		t.Errorf("the executable: %+v", v)
	}
	if v := vs[1]; v.Scan.Signature != "Eicar-Test-Signature" || v.Refused.Error() != "public.txt was blocked: the malware scanner found Eicar-Test-Signature" {
		t.Errorf("the malware: %+v", v)
	}
	vs, _ = sessions.Verdicts(ctx, st, ss, list[:1], sessions.Caller{Name: "alice"}, sessions.ListOptions{Now: now})
	if vs[0].Scan.Verdict != sessions.ScanOff {
		t.Errorf("with no scanner: %+v", vs[0].Scan)
	}
	if entries, _ := st.AuditLog(ctx, 0, 10); len(entries) != 0 {
		t.Errorf("a listing wrote the audit log: %+v", entries)
	}
}
