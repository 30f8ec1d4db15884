package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// files get decides who may have a file by its classification, as the API does: the
// owner's restricted file is refused (exit 1, nothing written, the way to a release
// said) until `files release` releases it, which is in the audit log with every
// decision; --policy can take a confidential file from its owner too.
func TestFilesGetRecipientAndRelease(t *testing.T) {
	st := seed(t)
	ctx := context.Background()
	const sid = "s-files-recipient"
	if err := st.CreateSession(ctx, store.Session{ID: sid, Agent: "coder", Owner: harnesstest.Owner}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for p, class := range map[string]string{"plan.txt": "restricted", "secret.txt": "confidential"} {
		content := []byte(p + "\n")
		sum := sha256.Sum256(content)
		if err := st.PutArtifact(ctx, store.Artifact{ID: "art-" + p, SessionID: sid, Path: p, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(content)),
			Classification: class, DetectedType: "text", Content: content, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}

	// files list says, before any download, what one would meet, as the API lists it.
	listed, _, err := run(t, st.Path(), "", "files", "list", sid)
	if err != nil || !strings.Contains(listed, "plan.txt: not for you: plan.txt is classified restricted") ||
		!regexp.MustCompile(`plan\.txt\s+\d+\s+\w+\s+restricted\s+text\s+off\s+refused`).MatchString(listed) ||
		!regexp.MustCompile(`secret\.txt\s+\d+\s+\w+\s+confidential\s+text\s+off\s+yes`).MatchString(listed) {
		t.Fatalf("files list: %v\n%s", err, listed)
	}
	out, _, err := run(t, st.Path(), "", "files", "get", sid, "plan.txt")
	if err == nil || out != "" || exitStatus(err) != exitError ||
		!strings.Contains(err.Error(), "plan.txt was not handed out: plan.txt is classified restricted, which nobody may download until an admin releases it") ||
		!strings.Contains(err.Error(), "trueforge-harness files release "+sid+" plan.txt --to "+harnesstest.Owner) {
		t.Fatalf("files get of a restricted file: %v (exit %d), stdout %q", err, exitStatus(err), out)
	}
	if out, _, err := run(t, st.Path(), "", "files", "get", sid, "secret.txt"); err != nil || out != "secret.txt\n" {
		t.Fatalf("files get of the owner's confidential file: %v, stdout %q", err, out)
	}
	pol := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(pol, []byte(`{"default": "allow", "downloads": {"confidential": {"roles": ["admin"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, err := run(t, st.Path(), "", "--policy", pol, "files", "get", sid, "secret.txt"); err == nil || out != "" ||
		!strings.Contains(err.Error(), "secret.txt is classified confidential, which only admins may download (the operator's download policy)") {
		t.Fatalf("files get of a confidential file the policy keeps for admins: %v, stdout %q", err, out)
	}

	for _, c := range []struct {
		args []string
		exit int
		says string
	}{
		{[]string{"files", "release", sid, "plan.txt"}, exitUsage, "--to is required"},
		{[]string{"files", "release", sid, "plan.txt", "--to", "Not A Name"}, exitUsage, "--to: user name"},
		{[]string{"files", "release", sid, "other.txt", "--to", "bob"}, exitNotFound, "other.txt was not offered for download in session " + sid},
		{[]string{"files", "release", "s-nope", "plan.txt", "--to", "bob"}, exitNotFound, "session s-nope"},
	} {
		if _, _, err := run(t, st.Path(), "", c.args...); exitStatus(err) != c.exit || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v: %v (exit %d); want exit %d saying %q", c.args, err, exitStatus(err), c.exit, c.says)
		}
	}
	out, errOut, err := run(t, st.Path(), "", "files", "release", sid, "./plan.txt", "--to", harnesstest.Owner, "--note", "reviewed")
	if err != nil || !strings.Contains(out, "released plan.txt (sha256 ") || !strings.Contains(out, "classified restricted) of session "+sid+" to "+harnesstest.Owner) || errOut != "" {
		t.Fatalf("files release: %v\nstdout %q\nstderr %q", err, out, errOut)
	}
	if out, _, err := run(t, st.Path(), "", "files", "get", sid, "plan.txt"); err != nil || out != "plan.txt\n" {
		t.Fatalf("files get of a released file: %v, stdout %q", err, out)
	}

	entries, err := st.AuditLog(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Actor+" "+e.Action+" "+strings.SplitN(e.Target, "@", 2)[0])
	}
	o := harnesstest.Owner + " "
	wantLog := []string{o + "download.allow " + sid + "/plan.txt", o + "download.release " + sid + "/plan.txt", o + "download.refuse " + sid + "/secret.txt",
		o + "download.allow " + sid + "/secret.txt", o + "download.refuse " + sid + "/plan.txt"}
	if strings.Join(got, "\n") != strings.Join(wantLog, "\n") {
		t.Errorf("the audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantLog, "\n"))
	}
	if !strings.HasSuffix(entries[1].Detail, "note: reviewed") {
		t.Errorf("the release's entry: %+v", entries[1])
	}
}
