package runner_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/codemode"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
)

// codeRunner is a Daytona-backed runner of a Code Mode agent over kb.
func (f *dtFixture) codeRunner(t *testing.T, name string, kb *kbServer, turns ...map[string]any) (*runner.Runner, *codemode.Mode) {
	t.Helper()
	harnesstest.AddAgent(t, f.st, name, "dtenv", harnesstest.AgentSpec{
		"model":       harnesstest.Script(turns...),
		"mcp_servers": []any{map[string]any{"name": "kb", "url": kb.URL, "credential_env": "TF_TEST_KB_TOKEN"}},
		"sandbox":     harnesstest.Sandbox("dtenv", 15, 60, 120),
		"code_mode":   true,
	})
	r := f.runner(t, name)
	return r, withCodeMode(t, r, mcptools.Options{User: harnesstest.Owner, Agent: name})
}

// Code Mode on Daytona (the emulator): the script runs as a session command whose
// input and logs carry the bridge; it combines two tools, sees no token (its
// environment and every process's command line and environment), and a cancel inside
// a slow call deletes the session with its processes while the call is recorded.
func TestDaytonaCodeMode(t *testing.T) {
	f := newDaytonaFixture(t)
	const token = "kb-CANARY-d4y70"
	kb := newKB(t, token)
	marker := "600.8" + randMarker()
	combine := `import os, glob, subprocess
f = kb.forecast(city="Oslo")
p = kb.population(city="Oslo")
seen = repr(dict(os.environ))
for d in glob.glob("/proc/[0-9]*"):
    for n in ("cmdline", "environ"):
        try:
            seen += open(d + "/" + n, "rb").read().decode("latin-1")
        except OSError:
            pass
print("combined:", f["city"], f["temp_c"], p, "token seen:", "` + token[:8] + `" + "` + token[8:] + `" in seen, len(seen) > 1000)`
	slow := `import subprocess
subprocess.Popen(["sleep", "` + marker + `"])
print(kb.slow(city="Lima"))`
	r, cm := f.codeRunner(t, "dtcode", kb, runCode(codemode.Python, combine), text("one"), runCode(codemode.Python, slow), text("two"), text("three"))
	sid, _ := r.NewSession(context.Background(), harnesstest.Owner)
	mustRun(t, r, sid, "combine")
	out := results(t, f.st, sid)[0]["text"].(string)
	if !strings.Contains(out, "exit code 0") || !strings.Contains(out, "combined: Oslo 21.5 2100000 token seen: False True") {
		t.Fatalf("the script's output %q", out)
	}
	if strings.Contains(out, token) {
		t.Fatal("the token reached the script's output")
	}
	if n := f.srv.Counts()["POST /process/session"]; n == 0 {
		t.Fatalf("the script did not run as a session command: %v", f.srv.Counts())
	}

	cancelInSlowCall(t, r, sid, "slow", kb, marker)
	sandboxtest.WaitFor(t, "the script's processes to go", 10*time.Second, func() bool { return len(sandboxtest.ProcessesWith(marker)) == 0 })
	close(kb.slow)
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := cm.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	calls := harnesstest.Payloads(t, f.st, sid, events.KindMCPCall)
	if n := len(calls); n != 4 || calls[2]["outcome"] != events.OutcomeUnknown || calls[3]["outcome"] != events.OutcomeCompleted || calls[3]["late"] != true {
		t.Fatalf("records %v; want two completed, then the slow call unknown and late completed", calls)
	}
	mustRun(t, r, sid, "and now?")
}
