package main

import (
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
)

func piece(stream, s string) runner.Event {
	return runner.Event{Partial: true, Stream: stream, Delta: s}
}

// Output written in pieces prints as whole lines, each stream's on its own, and a
// partial line (a prompt) shows after lineFlushInterval without waiting for its newline.
func TestLiveOutputByLine(t *testing.T) {
	var out sandboxtest.SyncBuffer
	p := newPrinter(&out, false, false)
	for _, e := range []runner.Event{
		piece("stdout", "python"), piece("stderr", "warn"), piece("stdout", " "), piece("stdout", "3.11.2"),
		piece("stderr", "ing\n"), piece("stdout", "\nnext "), piece("stdout", "line\nlast"),
	} {
		p.event(e)
	}
	p.finish()
	want := "   | warning\n   | python 3.11.2\n   | next line\n   | last\n"
	if out.String() != want {
		t.Fatalf("printed %q; want %q", out.String(), want)
	}

	var prompt sandboxtest.SyncBuffer
	p = newPrinter(&prompt, false, false)
	p.event(piece("stdout", "Password: "))
	time.Sleep(lineFlushInterval + 300*time.Millisecond)
	if got := prompt.String(); got != "   | Password: " {
		t.Fatalf("after the flush interval: %q; want the partial line shown", got)
	}
	// The rest of the line continues it.
	p.event(piece("stdout", "ok\n"))
	p.finish()
	if got := prompt.String(); got != "   | Password: ok\n" {
		t.Fatalf("printed %q", got)
	}
}

// The acceptance check: a real sandbox turn through the CLI, Python printing several
// arguments unbuffered, shows them as one line.
func TestCLIPrintsUnbufferedPythonAsOneLine(t *testing.T) {
	env := harnesstest.NewEnv(t)
	harnesstest.AddAgent(t, env.Store, "printer", "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			map[string]any{"tool_calls": []any{map[string]any{"name": "exec", "arguments": map[string]any{
				"command": `PYTHONUNBUFFERED=1 python3 -c 'print("a", 1, "b"); print("c", 2, "d")'`}}}},
			map[string]any{"text": "printed"}),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
	out, _, err := run(t, env.Store.Path(), "", "run", "printer", "go")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\n   | a 1 b\n", "\n   | c 2 d\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the live output lacks the line %q:\n%s", strings.TrimSpace(want), out)
		}
	}
}
