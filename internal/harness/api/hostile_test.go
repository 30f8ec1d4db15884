package api_test

import (
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
)

// hostileListing is the part of GET /files?workspace=1 these tests read.
type hostileListing struct {
	Files []struct {
		Path string `json:"path"`
		URL  string `json:"url"`
	} `json:"files"`
	Workspace struct {
		Entries []struct {
			Path string `json:"path"`
			Type string `json:"type"`
			Size int64  `json:"size"`
			URL  string `json:"url"`
		} `json:"entries"`
		Omitted        int  `json:"omitted"`
		OmittedAtLeast bool `json:"omitted_at_least"`
	} `json:"workspace"`
}

// The API on hostile workspace content (sandboxtest.HostileScript): the workspace
// listing is valid UTF-8 JSON, bounded with what it left out counted, and every
// regular file in it downloads by its listed url, a name that is not UTF-8 included;
// Content-Disposition never carries a control character, a raw quote or a byte that is
// not ASCII; the 10 GB sparse file is refused from its size at once, links never
// followed. Offered files with a newline or quotes in their names list and download
// by their urls, which is all the web page uses.
func TestHostileWorkspaceThroughTheAPI(t *testing.T) {
	f := newFixture(t, fixtureOpts{sandboxes: true})
	harnesstest.AddAgent(t, f.st, "coder", "default", harnesstest.AgentSpec{"sandbox": harnesstest.Sandbox("default", 30, 60, 120), "model": script(
		execCall(sandboxtest.HostileScript),
		call("offer_artifact", map[string]any{"path": "new\nline"}),
		call("offer_artifact", map[string]any{"path": `quo"te's`}),
		text("Offered."),
	)})
	sid := f.newSession("alice", "coder")
	start := time.Now()
	f.turn("alice", sid, "make hostile files")
	t.Logf("the turn that made the workspace took %s", time.Since(start))
	files := "/api/v1/sessions/" + sid + "/files"

	top := hostileList(t, f, files+"?workspace=1")
	if len(top.Files) != 2 || top.Workspace.Omitted != 0 {
		t.Fatalf("offered %+v, omitted %d", top.Files, top.Workspace.Omitted)
	}
	for _, o := range top.Files {
		r := f.req("GET", o.URL, "alice", nil)
		want(t, "the offered "+o.Path, r, http.StatusOK, "")
		checkDisposition(t, o.Path, r)
	}
	// The web page's file cards link to each segment of path through encodeURIComponent,
	// which leaves ' as it is (url.PathEscape does not).
	for _, href := range []string{"new%0Aline", "quo%22te's"} {
		want(t, "the web page's link "+href, f.req("GET", files+"/"+href, "alice", nil), http.StatusOK, "")
	}
	byType := map[string]int{}
	for _, e := range top.Workspace.Entries {
		byType[e.Type]++
		if e.Type == "file" && e.URL == "" || e.Type != "file" && e.URL != "" {
			t.Errorf("entry %q (%s) has url %q; want one for regular files only", e.Path, e.Type, e.URL)
		}
	}
	if byType["file"] != len(sandboxtest.HostileNames)+1 || byType["symlink"] != len(sandboxtest.HostileLinks) || byType["dir"] != 1 {
		t.Errorf("the workspace lists %v", byType)
	}
	checkHostileDownloads(t, f, top)

	start = time.Now()
	many := hostileList(t, f, files+"?workspace=1&dir=many")
	if len(many.Workspace.Entries) != sandbox.DefaultListEntries || many.Workspace.Omitted != 100000-sandbox.DefaultListEntries || many.Workspace.OmittedAtLeast {
		t.Errorf("listing many/: %d entries, omitted %d", len(many.Workspace.Entries), many.Workspace.Omitted)
	}
	t.Logf("listing 100,000 files took %s", time.Since(start))
	for _, p := range sandboxtest.HostileLinks {
		want(t, "listing the link "+p, f.req("GET", files+"?workspace=1&dir="+p, "alice", nil), http.StatusUnprocessableEntity, api.CodeNotRegular)
	}
}

// hostileList gets a listing, checks its body is valid UTF-8 JSON, and decodes it.
func hostileList(t *testing.T, f *fixture, path string) hostileListing {
	t.Helper()
	r := f.req("GET", path, "alice", nil)
	want(t, "listing "+path, r, http.StatusOK, "")
	if !utf8.Valid(r.body) || !json.Valid(r.body) {
		t.Fatalf("the listing is not valid UTF-8 JSON: %q", r.body)
	}
	var l hostileListing
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// checkHostileDownloads downloads every regular file of the workspace's listing by its
// url and checks the sparse file and the links are refused.
func checkHostileDownloads(t *testing.T, f *fixture, top hostileListing) {
	t.Helper()
	got := map[string]bool{}
	for _, e := range top.Workspace.Entries {
		if e.URL == "" || e.Path == "big.img" {
			continue
		}
		r := f.req("GET", e.URL, "alice", nil)
		want(t, "downloading "+e.URL, r, http.StatusOK, "")
		if string(r.body) != "x" {
			t.Errorf("%s: %q", e.URL, r.body)
		}
		raw, err := url.PathUnescape(e.URL[strings.LastIndex(e.URL, "/files/")+len("/files/") : strings.Index(e.URL, "?")])
		if err != nil {
			t.Fatal(err)
		}
		got[raw] = true
		checkDisposition(t, raw, r)
	}
	for _, n := range sandboxtest.HostileNames {
		if !got[n] {
			t.Errorf("%q was not downloaded by its listed url (got %v)", n, got)
		}
	}
	files := top.Files[0].URL[:strings.LastIndex(top.Files[0].URL, "/")+1]
	start := time.Now()
	r := f.req("GET", files+"big.img?workspace=1", "alice", nil)
	want(t, "the 10 GB sparse file", r, http.StatusUnprocessableEntity, api.CodeFileTooLarge)
	if took := time.Since(start); took > 2*time.Second || !strings.Contains(r.errMessage(), "10737418240 bytes") {
		t.Errorf("refusing the sparse file took %s: %s", took, r.body)
	}
	for _, p := range append(sandboxtest.HostileLinks, "up/etc/passwd", "root/etc/passwd", "loop1/x", "self/x") {
		want(t, "the link "+p, f.req("GET", files+p+"?workspace=1", "alice", nil), http.StatusUnprocessableEntity, api.CodeNotRegular)
	}
}

// checkDisposition checks a download's Content-Disposition for a file named name:
// printable ASCII only, parseable, with a filename free of controls and overrides.
func checkDisposition(t *testing.T, name string, r response) {
	t.Helper()
	cd := r.Header.Get("Content-Disposition")
	if strings.ContainsFunc(cd, func(c rune) bool { return c < 0x20 || c > 0x7e }) {
		t.Errorf("%q: Content-Disposition %q holds a control or non-ASCII character", name, cd)
	}
	_, params, err := mime.ParseMediaType(cd)
	if err != nil {
		t.Errorf("%q: Content-Disposition %q does not parse: %v", name, cd, err)
		return
	}
	if fn := params["filename"]; fn == "" || strings.ContainsFunc(fn, func(c rune) bool { return c < 0x20 || c == 0x7f || c == 0x202e || c == utf8.RuneError }) {
		t.Errorf("%q: filename %q", name, fn)
	}
}
