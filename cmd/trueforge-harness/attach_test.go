package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
)

// run --attach: the files are stored with their digest and the directory's content
// store, the header names them, and the first tool call that needs the sandbox finds
// them in /workspace/attachments/ (checked in the sandbox and by the digest on the
// host's side of the store). A missing file or a bad classification is a usage error
// that creates no session.
func TestRunAttach(t *testing.T) {
	env := harnesstest.NewEnv(t)
	ctx := context.Background()
	harnesstest.AddAgent(t, env.Store, "reader", "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			map[string]any{"tool_calls": []any{map[string]any{"name": "exec", "arguments": map[string]any{"command": "sha256sum /workspace/attachments/*"}}}},
			map[string]any{"text": "read"}),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
	dir := t.TempDir()
	data := []byte("%PDF-1.7\nnot really a pdf\n")
	file := filepath.Join(dir, "My Report (final).pdf")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	store := filepath.Join(dir, "attachments")

	for _, bad := range [][]string{
		{"run", "reader", "go", "--attach", filepath.Join(dir, "missing.txt")},
		{"run", "reader", "go", "--attach", file, "--classification", "secret"},
		{"run", "reader", "go", "--attach", dir},
	} {
		_, _, err := run(t, env.Store.Path(), "", bad...)
		if exitStatus(err) != exitUsage {
			t.Fatalf("%v: %v, want a usage error", bad, err)
		}
	}
	if ss, _ := env.Store.ListSessions(ctx, "", "reader"); len(ss) != 0 {
		t.Fatalf("a refused --attach created %d sessions", len(ss))
	}

	out, _, err := run(t, env.Store.Path(), "", "--attachments-dir", store, "run", "reader", "go", "--attach", file, "--classification", "confidential")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "you: go\n  [attached] /workspace/attachments/My Report _final_.pdf · 26 bytes · pdf · sha256 "+hexSum+" · confidential\n") ||
		!strings.Contains(out, hexSum+"  /workspace/attachments/My Report _final_.pdf") {
		t.Fatalf("run output:\n%s", out)
	}
	if got, err := os.ReadFile(filepath.Join(store, hexSum[:2], hexSum)); err != nil || string(got) != string(data) {
		t.Fatalf("the attachments directory holds %q, %v", got, err)
	}
	ss, _ := env.Store.ListSessions(ctx, "", "reader")
	if len(ss) != 1 {
		t.Fatalf("%d sessions", len(ss))
	}
	show, _, err := run(t, env.Store.Path(), "", "sessions", "show", ss[0].ID)
	if err != nil || !strings.Contains(show, "you: go\n  [attached] /workspace/attachments/My Report _final_.pdf · 26 bytes · pdf · sha256 "+hexSum+" · confidential\n") {
		t.Fatalf("sessions show: %v\n%s", err, show)
	}
	if strings.Count(out, "/workspace/attachments/My Report _final_.pdf · 26 bytes") != 1 {
		t.Errorf("run shows the attachment %d times:\n%s", strings.Count(out, "· 26 bytes"), out)
	}
	as, err := env.Store.ListAttachments(ctx, ss[0].ID)
	if err != nil || len(as) != 1 || as[0].Uploader != harnesstest.Owner || as[0].DeclaredType != "application/pdf" || !as[0].InDirectory || as[0].WrittenSandbox == "" {
		t.Fatalf("attachments: %+v, %v", as, err)
	}
}
