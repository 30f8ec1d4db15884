package main

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/termsafe"
)

// The CLI on hostile workspace content (sandboxtest.HostileScript, and 1,500 more files
// at the top so that `files list` reaches its bound): `files list` shows every name on
// one line, escaped, and says how many it left out; -o json decodes to the names, with
// an exact path_encoded for one that is not UTF-8; `files get` hands out each file by
// its name, byte for byte to a pipe, with stderr and errors on one line whatever the
// name, and refuses the 10 GB sparse file from its size at once.
func TestHostileWorkspaceThroughTheCLI(t *testing.T) {
	env := harnesstest.NewEnv(t)
	call := func(name string, args map[string]any) map[string]any {
		return map[string]any{"tool_calls": []any{map[string]any{"name": name, "arguments": args}}}
	}
	harnesstest.AddAgent(t, env.Store, "hostile", "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			call("exec", map[string]any{"command": sandboxtest.HostileScript + "\nseq 1 1500 | sed s/^/top/ | xargs touch"}),
			call("offer_artifact", map[string]any{"path": `quo"te's`}),
			map[string]any{"text": "done"}),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
	db := env.Store.Path()
	if _, errOut, err := run(t, db, "", "run", "hostile", "go"); err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	ss, _ := env.Store.ListSessions(context.Background(), "", "hostile")
	if len(ss) != 1 {
		t.Fatalf("%d sessions", len(ss))
	}
	id := ss[0].ID

	list, _, err := run(t, db, "", "files", "list", id)
	if err != nil {
		t.Fatal(err)
	}
	assertTerminalSafe(t, "files list", list, false)
	for _, n := range sandboxtest.HostileNames {
		if !strings.Contains(list, "\t"+termsafe.Line(n)+"\n") {
			t.Errorf("files list lacks %q on a line of its own:\n%s", termsafe.Line(n), list)
		}
	}
	// 1,500 + 7 hostile names + big.img + many + 5 links at the top.
	if want := "(514 more entries not shown)"; !strings.Contains(list, want) || strings.Count(list, "\n  ") > sandbox.DefaultListEntries+1 {
		t.Errorf("files list of 1,516 entries does not stop at %d with %q", sandbox.DefaultListEntries, want)
	}

	doc := jsonOf[filesJSON](t, db, "files", "list", id)
	if len(doc.Workspace.Files) != sandbox.DefaultListEntries || doc.Workspace.Omitted != 514 || doc.Workspace.OmittedAtLeast {
		t.Errorf("files list -o json: %d files, omitted %d", len(doc.Workspace.Files), doc.Workspace.Omitted)
	}
	exact := map[string]bool{}
	for _, f := range doc.Workspace.Files {
		p, err := url.PathUnescape(f.PathEncoded)
		// JSON gives U+FFFD for each byte that is not UTF-8, as a []rune conversion does.
		if err != nil || string([]rune(p)) != f.Path {
			t.Errorf("path %q, path_encoded %q (%v)", f.Path, f.PathEncoded, err)
		}
		exact[p] = true
	}
	for _, n := range sandboxtest.HostileNames {
		if !strings.HasPrefix(n, "n") && !exact[n] { // the long name and new\nline sort after the 1,000 shown
			t.Errorf("files list -o json has no path_encoded for %q", n)
		}
	}
	checkHostileGets(t, db, id)
}

// checkHostileGets gets each hostile name (the quoted one offered, the others from the
// sandbox), the sparse file and a name through a link.
func checkHostileGets(t *testing.T, db, id string) {
	for _, n := range sandboxtest.HostileNames {
		out, errOut, err := run(t, db, "", "files", "get", id, n)
		if err != nil || out != "x" {
			t.Errorf("files get %q: %v, %q", n, err, out)
		}
		assertTerminalSafe(t, "files get "+termsafe.Line(n)+" (stderr)", errOut, false)
		for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
			if !strings.HasPrefix(line, termsafe.Line(n)+": ") {
				t.Errorf("files get %q: stderr line %q does not start with the escaped name", n, line)
			}
		}
	}
	start := time.Now()
	_, _, err := run(t, db, "", "files", "get", id, "big.img")
	if err == nil || !strings.Contains(err.Error(), "file too large: 10737418240 bytes, over 16777216") || time.Since(start) > 5*time.Second {
		t.Errorf("files get of the 10 GB sparse file: %v after %s; want a refusal naming its size and the cap, at once", err, time.Since(start))
	}
	for _, p := range []string{"new\nline/x", "loop1", "up/etc/passwd", "self/x"} {
		_, _, err := run(t, db, "", "files", "get", id, p)
		if err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("files get %q: %q; want one line of error", p, err)
		}
	}
}
