package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
)

// Downloads say what they are (X-Trueforge-Type, from the content), and an executable
// is refused, offered or as a workspace file, named for what it claims or not, unless
// the operator allows executable downloads.
func TestDownloadsCheckedForType(t *testing.T) {
	for _, allow := range []bool{false, true} {
		f := newFixture(t, fixtureOpts{sandboxes: true, cfg: func(cfg *api.Config) { cfg.AllowExecutables = allow }})
		harnesstest.AddAgent(t, f.st, "coder", "default", harnesstest.AgentSpec{"sandbox": harnesstest.Sandbox("default", 30, 60, 120), "model": script(
			execCall("printf '%%PDF-1.7 report' > report.pdf && cp /bin/true report-final.pdf && printf '#!/bin/sh\\necho hi\\n' > fix.sh"),
			call("offer_artifact", map[string]any{"path": "report.pdf"}),
			call("offer_artifact", map[string]any{"path": "report-final.pdf"}),
			call("offer_artifact", map[string]any{"path": "fix.sh"}),
			text("Offered."),
		)})
		sid := f.newSession("alice", "coder")
		f.turn("alice", sid, "make files")
		files := "/api/v1/sessions/" + sid + "/files"

		r := f.req("GET", files+"/report.pdf", "alice", nil)
		want(t, "a real pdf", r, http.StatusOK, "")
		if r.Header.Get("X-Trueforge-Type") != "pdf" {
			t.Fatalf("report.pdf: X-Trueforge-Type %q", r.Header.Get("X-Trueforge-Type"))
		}
		for _, c := range []struct{ path, says string }{
			{"report-final.pdf", "report-final.pdf is an executable (elf), named .pdf but its content is elf"},
			{"report-final.pdf?workspace=1", "report-final.pdf is an executable (elf)"},
			{"fix.sh", "fix.sh is an executable (script)"},
		} {
			r := f.req("GET", files+"/"+c.path, "alice", nil)
			if allow {
				want(t, c.path+" with executables allowed", r, http.StatusOK, "")
				if typ := r.Header.Get("X-Trueforge-Type"); typ == "" || typ == "pdf" {
					t.Fatalf("%s: X-Trueforge-Type %q", c.path, typ)
				}
				continue
			}
			want(t, c.path, r, http.StatusForbidden, api.CodeExecutable)
			if msg := r.errMessage(); !strings.Contains(msg, c.says) || !strings.Contains(msg, "build and signing pipeline") {
				t.Fatalf("%s: %q; want it to say %q and why", c.path, msg, c.says)
			}
			if len(r.body) > 0 && strings.Contains(string(r.body), "ELF") {
				t.Fatalf("%s: the refusal carried the file's bytes", c.path)
			}
		}
	}
}
