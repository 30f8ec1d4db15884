package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events/eventstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// sessions show prints every payload shape existing logs hold, as stored by earlier
// harnesses: both field sets of sandbox_lost, the artifact under its Go field names,
// and sandbox_network_reattached, which nothing records any more.
func TestPrintExistingLogs(t *testing.T) {
	want := map[string][]string{
		"user message":                  {"you: what is 2+2?"},
		"model message":                 {"agent [replay]: Running it.", `  -> exec {"command":"python3 -V"}`},
		"usage":                         {"· tokens: step 120 in / 8 out; this turn 120 / 8"},
		"tool call":                     nil, // shown with its model message
		"tool result":                   {"  <- exec (cut for the model from 40000 bytes; full output: sessions show SESSION --tool-output replay-1-0)", "     Python 3.11.2"},
		"tool result of a dead harness": {"  <- ERROR exec", "interrupted: the harness stopped"},
		"cancelled":                     {"! turn cancelled"},
		"error":                         {"! error (model): model unavailable"},
		"max turns":                     {"! limit reached: max_turns (50)"},
		"token budget":                  {"! limit reached: token_budget (1000)"},
		"run interrupted":               {"! run r-0 was interrupted: its harness process stopped mid-run"},
		"run finished":                  {"— turn completed: 2 model steps, 120 tokens in, 8 out"},
		"resumed":                       {"[sandbox] RESUMED tf-s-1-1 from Stopped, snapshot snap-1 (recorded snap-1)"},
		"stopped":                       {"[sandbox] STOPPED tf-s-1-1 after 15 idle minutes"},
		"archived":                      {"[sandbox] ARCHIVED tf-s-1-1 after 1440 idle minutes"},
		"deleted after a loss":          {"[sandbox] DELETED tf-s-1-1 after 10080 idle minutes"},
		"recovered":                     {"[sandbox] RECOVERED tf-s-1-1"},
		"reclaimed":                     {"[sandbox] RECLAIMED tf-s-1-1: commands left running by a harness that died were stopped; files kept"},
		"egress denied":                 {"[egress] DENIED plain evil.test:80 GET /: not_allowed — evil.test is not in allow_domains"},
		"egress allowed with a secret":  {"[egress] allowed terminate api.test:443 POST /v1 (secrets substituted: API_KEY)"},
		"skill loaded":                  {"[skill] LOADED pdf (sha256:0f1e) into .skills/pdf/ of sandbox tf-s-abc-2: 3 files, 160 bytes, read-only"},
		"mcp call from a script, allowed by a policy rule":   {"[mcp] weather__forecast call 2 for alice: completed, 120 bytes in 4 ms"},
		"mcp call that ended after its script was cancelled": {"[mcp] db__slow call 1 for bob (after its script ended): FAILED in 900 ms: connection reset"},
		"approval requested for an MCP call": {
			"[approval] WAITING apr_1: create_pull_request on https://api.githubcopilot.com/mcp needs approval by $caller, lead-* before 2026-12-07T13:10:00Z",
			"rule 0: pull requests need a person", `arguments: {"title":"Fix"}`, "decide: trueforge-harness approvals approve|deny apr_1 [--note TEXT]"},
		"approval decided by an approver": {"[approval] APPROVED apr_1 by lead-ana: looks right"},
		"malware found in an offered file": {"[malware] BLOCKED dist/tool.exe (sha256 275a021bbfb6489e54d471899f7db9d1663fc695ec2fe2a2c4538aabf651fd0f): " +
			"Eicar-Signature found by ClamAV 1.4.6/27530/Tue Jan 13 09:25:45 2026"},
		"archive extracted with entries skipped": {"[archive] EXTRACTED attachments/src.tgz (tar.gz, sha256 9f2c, attachment att-1) into attachments/src/: 3 files, 1 folders, 0 symlinks, 0 hard links, 120 bytes",
			`skipped ../../evil: the name has a ".." component`, "STOPPED (max_ratio): the archive unpacks to more than 100 times"},
		"lost, found gone (state/reason)": {"[sandbox] LOST tf-s-1-1 (was stopped): the backend no longer has it"},
		"lost, seen by a call (status/cause)": {
			"[sandbox] LOST tf-s-1-1 (was running; backend: gone): exec failed: sandbox tf-s-1-1 is lost",
			"uncertain files: (files written by: echo x > out.txt)",
		},
		"tool result with an artifact under Go field names": {
			"[download] report.md: 17000000 bytes, sha256 ab12, untrusted, expires 2026-12-06T10:00:00Z, snapshot snap-1",
		},
		"provisioned, as a map (limits_enforced without unenforced_limits)": {
			"[sandbox] PROVISIONED tf-s-1-1 (local backend, provider local) from environment default, snapshot snap-1 in 24 ms — first call that needs a sandbox",
		},
		"provisioned with unenforced limits": {
			"[sandbox] PROVISIONED tf-s-1-2", "[sandbox] WARNING: limits not enforced on this host: cpu", "cpu: no writable cgroup",
		},
		"provisioned under a rollout, from the previous version": {
			"[sandbox] PROVISIONED tf-s-2-1 (local backend, provider local) from environment default, snapshot snap-0 in 21 ms",
			"[sandbox] ROLLOUT: the previous version (the current one for 30% of new sessions)",
		},
		"network reattached (no longer recorded)": {
			"[sandbox] NETWORK REATTACHED tf-s-1-1 (processes restarted, files kept): the egress proxy was recreated",
		},
	}
	for _, l := range eventstest.Logs {
		lines, ok := want[l.Name]
		if !ok {
			t.Errorf("no expected output for %q", l.Name)
			continue
		}
		var out bytes.Buffer
		newPrinter(&out, false, false).render(store.Event{Seq: 1, Kind: l.Kind, Payload: []byte(l.JSON)}, false)
		got := out.String()
		for _, w := range lines {
			if !strings.Contains(got, w) {
				t.Errorf("%s: output %q lacks %q", l.Name, got, w)
			}
		}
		// Printed by its own line, never as a raw dump of an unread kind.
		if (got == "") != (l.Kind == events.KindToolCall) || strings.Contains(got, l.Kind+" {") {
			t.Errorf("%s: printed as %q", l.Name, got)
		}
	}
}
