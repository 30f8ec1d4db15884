package api_test

import (
	"context"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
)

// Issue 23's lesser findings on downloads, driven as the sandbox would: an offered
// file named with a right-to-left override (evil<U+202E>txt.exe shows as
// "evilexe.txt") is saved under a name without it, in filename and filename*; and a
// symlink to a host file swapped in for a workspace file while it is being downloaded
// is refused with a 4xx (not_regular), never a 500 and never the host file's content.
func TestDownloadsResistTheSandbox(t *testing.T) {
	f := newFixture(t, fixtureOpts{sandboxes: true})
	harnesstest.AddAgent(t, f.st, "coder", "default", harnesstest.AgentSpec{"sandbox": harnesstest.Sandbox("default", 30, 60, 120), "model": script(
		execCall(`printf x > "$(printf 'evil\342\200\256txt.exe\033[2J')" && printf inside > race`),
		call("offer_artifact", map[string]any{"path": "evil\u202etxt.exe\x1b[2J"}),
		text("Offered."),
	)})
	sid := f.newSession("alice", "coder")
	f.turn("alice", sid, "make files")
	files := "/api/v1/sessions/" + sid + "/files/"

	r := f.req("GET", files+url.PathEscape("evil\u202etxt.exe\x1b[2J"), "alice", nil)
	want(t, "the offered file", r, http.StatusOK, "")
	cd := r.Header.Get("Content-Disposition")
	if want := `attachment; filename="evil_txt.exe_[2J"; filename*=UTF-8''evil_txt.exe_%5B2J`; cd != want {
		t.Errorf("Content-Disposition %q; want %q", cd, want)
	}
	if dec, _ := url.PathUnescape(cd); strings.ContainsAny(dec, "\u202e\x1b") {
		t.Errorf("Content-Disposition %q keeps the override or the escape", cd)
	}

	// The race, from the host's side of the workspace, as fast as it can.
	rec, err := f.st.GetSessionSandbox(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	ws := workspaceOnHost(t, f.env.Dir, rec.SandboxID)
	canary := filepath.Join(t.TempDir(), "host-secret")
	must(t, os.WriteFile(canary, []byte("HOST-CANARY"), 0o644))
	stop := sandboxtest.SwapLinkAndFile(t, ws, "race", canary)
	defer stop()
	var served, refused int
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		r := f.req("GET", files+"race?workspace=1", "alice", nil)
		if strings.Contains(string(r.body), "HOST-CANARY") {
			t.Fatalf("the host file was served: %d %s", r.StatusCode, r.body)
		}
		switch {
		case r.StatusCode == http.StatusOK && string(r.body) == "inside":
			served++
		case r.StatusCode == http.StatusUnprocessableEntity && r.errCode() == api.CodeNotRegular:
			refused++
		default:
			t.Fatalf("a download during the swap answered %d %s; want 200 or 422 %s", r.StatusCode, r.body, api.CodeNotRegular)
		}
	}
	t.Logf("%d downloads served the file, %d refused the link", served, refused)
	if served == 0 || refused == 0 {
		t.Fatalf("the race was not exercised: %d served, %d refused", served, refused)
	}
}

// workspaceOnHost finds sandbox id's workspace directory under the local backend's data
// directory dir.
func workspaceOnHost(t *testing.T, dir, id string) string {
	t.Helper()
	var found string
	suffix := string(filepath.Separator) + filepath.Join(id, "data", "workspace")
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasSuffix(p, suffix) {
			found = p
			return fs.SkipAll
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no workspace of %s under %s", id, dir)
	}
	return found
}
