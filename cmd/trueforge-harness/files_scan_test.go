package main

import (
	"context"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/clamtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
)

// files get with --scanner: a clean offered file downloads, EICAR is refused (exit
// status 1) with a malware_found event, a stopped clamd fails closed unless
// --scanner-fail-open, and a bad --scanner is a usage error.
func TestFilesGetScanned(t *testing.T) {
	c := clamtest.Start(t)
	env := harnesstest.NewEnv(t)
	call := func(name string, args map[string]any) map[string]any {
		return map[string]any{"tool_calls": []any{map[string]any{"name": name, "arguments": args}}}
	}
	harnesstest.AddAgent(t, env.Store, "reporter", "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			call("write_file", map[string]any{"path": "report.txt", "content": "offered\n"}),
			call("write_file", map[string]any{"path": "eicar.com", "content": clamtest.EICAR}),
			call("write_file", map[string]any{"path": "later.txt", "content": "later\n"}),
			call("offer_artifact", map[string]any{"path": "report.txt"}),
			call("offer_artifact", map[string]any{"path": "eicar.com"}),
			call("offer_artifact", map[string]any{"path": "later.txt"}),
			map[string]any{"text": "done"}),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
	if _, _, err := run(t, env.Store.Path(), "", "run", "reporter", "go"); err != nil {
		t.Fatal(err)
	}
	ss, _ := env.Store.ListSessions(context.Background(), "", "reporter")
	if len(ss) != 1 {
		t.Fatalf("%d sessions", len(ss))
	}
	id, sc := ss[0].ID, "--scanner=unix:"+c.Socket
	out, errOut, err := run(t, env.Store.Path(), "", sc, "files", "get", id, "report.txt")
	if err != nil || out != "offered\n" || !strings.Contains(errOut, "scanned clean (ClamAV ") {
		t.Fatalf("files get report.txt: %v\nstdout %q\nstderr %s", err, out, errOut)
	}
	for range 2 {
		out, _, err = run(t, env.Store.Path(), "", sc, "files", "get", id, "eicar.com")
		if err == nil || out != "" || !strings.Contains(err.Error(), "eicar.com was blocked: the malware scanner found "+clamtest.Reported) || exitStatus(err) != 1 {
			t.Fatalf("files get eicar.com: %v (exit %d), stdout %q", err, exitStatus(err), out)
		}
	}
	if evs, err := env.Store.EventsOfKind(context.Background(), id, events.KindMalwareFound); err != nil || len(evs) != 1 {
		t.Fatalf("%d malware_found events, %v; want 1", len(evs), err)
	}

	c.Stop()
	if _, _, err := run(t, env.Store.Path(), "", sc, "files", "get", id, "later.txt"); err == nil || !strings.Contains(err.Error(), "could not be scanned") {
		t.Fatalf("files get later.txt with clamd stopped: %v; want a refusal", err)
	}
	out, errOut, err = run(t, env.Store.Path(), "", sc, "--scanner-fail-open", "files", "get", id, "later.txt")
	if err != nil || out != "later\n" || !strings.Contains(errOut, "was not scanned") {
		t.Fatalf("files get later.txt failing open: %v\nstdout %q\nstderr %s", err, out, errOut)
	}
	if _, _, err := run(t, env.Store.Path(), "", "--scanner=clamd", "files", "get", id, "report.txt"); err == nil || !strings.Contains(err.Error(), "--scanner") || exitStatus(err) != exitUsage {
		t.Fatalf("a bad --scanner: %v", err)
	}
}
