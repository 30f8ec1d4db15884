package runner_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/asuser"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/local"
)

// demoLimits are the limits of the quickstart's sandboxes (the default environment's:
// 1 CPU, 1 GB memory, 3 GB disk), as the harness asks for them.
var demoLimits = sandbox.Limits{CPU: 1, MemoryMB: 1024, DiskMB: 3072}

// demoAgent stores an agent that does with its sandbox what make demo's code turn does:
// run code that writes a file, then read the file back.
func demoAgent(t *testing.T, f *fixture, name string) {
	t.Helper()
	harnesstest.AddAgent(t, f.env.Store, name, "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			exec(`echo "hello from the sandbox" > report.md && python3 -c 'print(sum(i * i for i in range(10)))'`),
			call("read_file", map[string]any{"path": "report.md"}),
			text("done"),
		),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
}

// limitNames lists the names of unenforced limits.
func limitNames(u []sandbox.UnenforcedLimit) []string {
	var out []string
	for _, l := range u {
		out = append(out, l.Limit)
	}
	return out
}

// provisioned decodes the session's sandbox_provisioned events.
func provisioned(t *testing.T, f *fixture, sid string) []events.SandboxProvisioned {
	t.Helper()
	evs, err := f.env.Store.Events(context.Background(), sid, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []events.SandboxProvisioned
	for _, e := range evs {
		if e.Kind == events.KindSandboxProvisioned {
			var p events.SandboxProvisioned
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

// requireDemoWorked checks the demo turn's results and its one sandbox_provisioned
// event, which must list exactly the limits the runtime cannot enforce here.
func requireDemoWorked(t *testing.T, f *fixture, sid string, unenforced []sandbox.UnenforcedLimit) {
	t.Helper()
	res := results(t, f.env.Store, sid)
	if len(res) != 2 || res[0]["is_error"] == true || res[1]["is_error"] == true {
		t.Fatalf("tool results %v; want two successes", res)
	}
	if out := res[0]["text"].(string); !strings.Contains(out, "285") {
		t.Fatalf("exec result %q; want the code's output", out)
	}
	if out := res[1]["text"].(string); !strings.Contains(out, "hello from the sandbox") {
		t.Fatalf("read_file result %q; want the file the code wrote", out)
	}
	prov := provisioned(t, f, sid)
	if len(prov) != 1 {
		t.Fatalf("%d sandbox_provisioned events; want one", len(prov))
	}
	p := prov[0]
	if p.Limits != demoLimits {
		t.Fatalf("the sandbox was asked for limits %+v; want the environment's %+v", p.Limits, demoLimits)
	}
	if p.LimitsEnforced != (len(unenforced) == 0) || !slices.Equal(limitNames(p.UnenforcedLimits), limitNames(unenforced)) {
		t.Fatalf("sandbox_provisioned says limits_enforced=%v, unenforced %v; the runtime says %v", p.LimitsEnforced, p.UnenforcedLimits, unenforced)
	}
	for _, u := range p.UnenforcedLimits {
		if u.Reason == "" {
			t.Fatalf("unenforced limit %s has no reason", u.Limit)
		}
	}
}

// TestDemoSandboxPath runs the demo's sandbox path as whoever runs the tests, with the
// runtime as the harness opens it (require_limits unset: required as root only). On a
// host without a writable cgroup for this user, the sandbox runs with the limits that
// can be enforced and the event says which are not; TestUnprivilegedDemoSandboxPath runs
// this as the unprivileged test account.
func TestDemoSandboxPath(t *testing.T) {
	f := newFixture(t)
	rt := f.env.Runtime.Runtime.(*local.Runtime)
	unenforced := rt.UnenforcedLimits(demoLimits)
	t.Logf("uid %d, limits required: %v, unenforced: %v", os.Geteuid(), rt.LimitsRequired(), limitNames(unenforced))
	for _, u := range unenforced {
		t.Logf("  %s", u)
	}
	demoAgent(t, f, "demo")
	r := f.runner(t, "demo")
	sid, _ := r.NewSession(context.Background(), harnesstest.Owner)
	mustRun(t, r, sid, "Run some code and give me a report")
	if len(unenforced) > 0 && rt.LimitsRequired() {
		requireRefused(t, f, sid)
		return
	}
	requireDemoWorked(t, f, sid, unenforced)
}

// requireRefused checks that the sandbox was refused with the error that names the
// limits and the fix, and that nothing was provisioned.
func requireRefused(t *testing.T, f *fixture, sid string) {
	t.Helper()
	res := results(t, f.env.Store, sid)
	if len(res) == 0 || res[0]["is_error"] != true {
		t.Fatalf("tool results %v; want the first to fail", res)
	}
	msg := res[0]["text"].(string)
	for _, want := range []string{"limits.cpu", "cannot be enforced", "require_limits", "delegated cgroup v2", "require_limits = false"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not mention %q", msg, want)
		}
	}
	if n := len(provisioned(t, f, sid)); n != 0 {
		t.Fatalf("%d sandbox_provisioned events after a refusal", n)
	}
	if list, _ := f.env.Runtime.List(context.Background()); len(list) != 0 {
		t.Fatalf("sandboxes %v exist after a refusal", list)
	}
}

// Without a writable cgroup (forced here with the runtime's diagnostic override, so the
// path runs on any host and as root), the demo's sandbox runs with the limits that can be
// enforced and says which are not; with require_limits it is refused instead.
func TestDemoSandboxPathWithoutCgroups(t *testing.T) {
	t.Setenv("TRUEFORGE_LOCAL_LIMITS", "rlimit")
	f := newFixture(t)
	rt := f.env.Runtime.Runtime.(*local.Runtime)
	unenforced := rt.UnenforcedLimits(demoLimits)
	if names := limitNames(unenforced); !slices.Contains(names, "cpu") || !slices.Contains(names, "memory") {
		t.Fatalf("unenforced %v without cgroups; want cpu and memory among them", names)
	}
	demoAgent(t, f, "demo")
	r := f.runner(t, "demo")

	rt.SetRequireLimits(true)
	strict, _ := r.NewSession(context.Background(), harnesstest.Owner)
	mustRun(t, r, strict, "Run some code and give me a report")
	requireRefused(t, f, strict)

	rt.SetRequireLimits(false)
	sid, _ := r.NewSession(context.Background(), harnesstest.Owner)
	mustRun(t, r, sid, "Run some code and give me a report")
	requireDemoWorked(t, f, sid, unenforced)
	if p := provisioned(t, f, sid)[0]; !strings.Contains(p.UnenforcedLimits[0].Reason, "TRUEFORGE_LOCAL_LIMITS=rlimit") {
		t.Fatalf("reason %q does not say why there is no cgroup", p.UnenforcedLimits[0].Reason)
	}
}

// TestUnprivilegedDemoSandboxPath runs TestDemoSandboxPath as the unprivileged test
// account (TRUEFORGE_TEST_UID, which scripts/test.sh sets to trueforge-test's uid; else
// nobody), through a copy of this test binary started as that user: the demo's sandbox
// path must work for a user without root, reporting the limits it cannot enforce.
func TestUnprivilegedDemoSandboxPath(t *testing.T) {
	harnesstest.RequireSandboxTools(t)
	if os.Geteuid() != 0 {
		t.Skip("skipping: not root, so TestDemoSandboxPath already ran unprivileged")
	}
	run := asuser.Prepare(t, "runner.test")
	uid := run.UID
	cmd := run.Command("/usr/local/bin:/usr/bin:/bin", nil, "-test.run=^TestDemoSandboxPath$", "-test.count=1", "-test.v", "-test.timeout=5m")
	out, err := cmd.CombinedOutput()
	t.Logf("as uid %d:\n%s", uid, out)
	if err != nil || !strings.Contains(string(out), "--- PASS: TestDemoSandboxPath ") {
		t.Fatalf("the demo's sandbox path as uid %d: %v", uid, err)
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil && !strings.Contains(string(out), "unenforced: [cpu") {
		// cgroup v1 (or hybrid): nothing is delegated to users, so cpu cannot be enforced
		// and must have been reported.
		t.Fatalf("on this cgroup v1 host the unprivileged run did not report cpu as unenforced")
	}
}
