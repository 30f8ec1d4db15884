package runner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// With no harness process at work after the first call (nobody reaps), a Daytona sandbox
// follows the agent's timings to deletion on Daytona's own intervals: stopped after
// idle_stop_minutes of inactivity, deleted delete_after_minutes after its last use (it
// is never archived by Daytona first, or Daytona would keep it forever). The
// environment's labels reach it beside the harness's own, which a user label cannot
// override, and its CIDRs reach networkAllowList. The next call finds the sandbox gone
// and provisions a new one.
func TestDaytonaSandboxFollowsAgentTimingsWithoutHarness(t *testing.T) {
	f := newDaytonaFixture(t)
	editEnvironment(t, f.st, "dtenv", func(e *store.Environment) {
		e.Settings.Labels = map[string]string{"cost-center": "ml-42", lifecycle.LabelSession: "someone-else", "trueforge.managed": "false"}
		e.Settings.AllowCIDRs = []string{"203.0.113.0/24", "198.51.100.7/32"}
	})
	r, sid, rec, sb := f.firstTurn(t, "dt", harnesstest.Sandbox("dtenv", 5, 60, 180),
		exec("echo hi"), text("one"), exec("echo again"), text("two"))
	if sb.Labels["cost-center"] != "ml-42" || sb.Labels[lifecycle.LabelSession] != sid || sb.Labels["trueforge.managed"] != "true" ||
		sb.Labels[lifecycle.LabelEnvironment] != "dtenv" {
		t.Fatalf("labels %v; want the environment's beside the harness's own, which win", sb.Labels)
	}
	if sb.NetworkAllowList != "203.0.113.0/24,198.51.100.7/32" {
		t.Fatalf("networkAllowList %q", sb.NetworkAllowList)
	}
	// idle 5; archive left at Daytona's maximum (0 = 30 days); delete 180 - 5 after the stop.
	if *sb.AutoStopInterval != 5 || *sb.AutoArchiveInterval != 43200 || *sb.AutoDeleteInterval != 175 {
		t.Fatalf("intervals stop=%d archive=%d delete=%d; want 5 43200 175", *sb.AutoStopInterval, *sb.AutoArchiveInterval, *sb.AutoDeleteInterval)
	}
	prov := harnesstest.Payloads(t, f.st, sid, "sandbox_provisioned")
	if net, _ := prov[0]["network"].(map[string]any); net == nil || len(net["allow_cidrs"].([]any)) != 2 {
		t.Fatalf("sandbox_provisioned %v; want the CIDRs in its network summary", prov)
	}

	for _, step := range []struct {
		advance    time.Duration
		want, what string // the state then ("" for deleted), what it means
	}{
		{4 * time.Minute, "started", "4 minutes idle: %q; want started"},
		{2 * time.Minute, "stopped", "6 minutes idle: %q; want stopped by Daytona"},
		{170 * time.Minute, "stopped", "176 minutes idle: %q; want still stopped"},
		{10 * time.Minute, "", "186 minutes idle: %q; want deleted by Daytona"},
	} {
		f.srv.Advance(step.advance)
		if s := f.srv.SandboxState(rec.SandboxID); s != step.want {
			t.Fatalf(step.what, s)
		}
	}

	mustRun(t, r, sid, "again")
	if n := f.srv.Count("POST /sandbox"); n != 2 {
		t.Fatalf("POST /sandbox %d times; want a new sandbox after Daytona deleted the first", n)
	}
}

// On the local backend the environment's labels reach the sandbox (SandboxInfo) under
// the harness's own, and its CIDRs reach the sandbox's egress proxy: from inside a real
// sandbox, an IP address outside the range is refused, and a name that is not on
// allow_domains but resolves inside the range is reached.
func TestLocalSandboxLabelsAndCIDRs(t *testing.T) {
	f := newEgressFixture(t)
	ctx := context.Background()
	editEnvironment(t, f.env.Store, "default", func(e *store.Environment) {
		e.Settings.Labels = map[string]string{"cost-center": "ml-42", lifecycle.LabelOwner: "mallory"}
		e.Settings.AllowCIDRs = []string{"127.0.0.1/32"}
	})
	port := f.up.port
	harnesstest.AddAgent(t, f.env.Store, "cidr", "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			exec(fmt.Sprintf(`curl -sS -v --max-time 20 https://127.0.0.2:%s/ 2>&1 | grep -i -e '^< HTTP' -e 'x-trueforge-deny'; echo; curl -sS --max-time 20 https://%s:%s/`, port, deniedHost, port)),
			text("done"),
		),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
	r := f.runner(t, "cidr")
	sid := ownerSession(t, r)
	mustRun(t, r, sid, "go")
	got := lastResult(t, f.env.Store, sid)
	if !strings.Contains(got, "403") || !strings.Contains(got, "not_allowed") || !strings.Contains(got, "hello from") {
		t.Fatalf("tool result %q; want 127.0.0.2 refused (not_allowed) and %s, inside the range, reached", got, deniedHost)
	}
	rec, err := f.env.Store.GetSessionSandbox(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	info, err := f.env.Runtime.Get(ctx, rec.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Labels["cost-center"] != "ml-42" || info.Labels[lifecycle.LabelOwner] != harnesstest.Owner || info.Labels[lifecycle.LabelSession] != sid {
		t.Fatalf("local sandbox labels %v; want the environment's under the harness's own", info.Labels)
	}
}
