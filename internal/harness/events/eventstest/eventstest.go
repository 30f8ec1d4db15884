// Package eventstest holds what existing session logs contain, for the tests of the
// events package and of everything that prints them.
package eventstest

import (
	"encoding/json"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Log is one payload as a harness stored it, and what events.Decode must make of it.
type Log struct {
	Name, Kind, JSON string
	Want             events.Payload
}

var expires = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
var created = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// Logs holds every payload shape existing logs can contain, as harnesses before package
// events wrote them (maps with literal keys, the store's artifact under its Go field
// names, both field sets of sandbox_lost, a kind no longer recorded).
var Logs = []Log{
	{"user message", events.KindUserMessage, `{"text":"what is 2+2?"}`, events.UserMessage{Text: "what is 2+2?"}},
	{"model message", events.KindModelMessage,
		`{"model":"scripted","replay":true,"stop_reason":"tool_use","text":"Running it.","tool_calls":[{"id":"replay-1-0","name":"exec","arguments":{"command":"python3 -V"}}]}`,
		events.ModelMessage{Text: "Running it.", Model: "scripted", StopReason: "tool_use", Replay: true,
			ToolCalls: []model.ToolCall{{ID: "replay-1-0", Name: "exec", Arguments: json.RawMessage(`{"command":"python3 -V"}`)}}}},
	{"usage", events.KindUsage, `{"budget":1000000,"run_input_tokens":120,"run_output_tokens":8,"step":{"input_tokens":120,"output_tokens":8}}`,
		events.Usage{Step: model.Usage{InputTokens: 120, OutputTokens: 8}, RunInputTokens: 120, RunOutputTokens: 8, Budget: 1000000}},
	{"tool call", events.KindToolCall, `{"arguments":{"command":"python3 -V"},"id":"replay-1-0","name":"exec"}`,
		events.ToolCall{ID: "replay-1-0", Name: "exec", Arguments: json.RawMessage(`{"command":"python3 -V"}`)}},
	{"tool result", events.KindToolResult, `{"full_size":40000,"id":"replay-1-0","is_error":false,"name":"exec","provisioned":true,"text":"exit_code: 0\nstdout:\nPython 3.11.2","truncated":true}`,
		events.ToolResult{ID: "replay-1-0", Name: "exec", Text: "exit_code: 0\nstdout:\nPython 3.11.2", Truncated: true, FullSize: 40000, Provisioned: true}},
	{"tool result of a dead harness", events.KindToolResult,
		`{"full_size":99,"id":"c1","is_error":true,"name":"exec","synthetic":true,"text":"interrupted: the harness stopped before this call finished"}`,
		events.ToolResult{ID: "c1", Name: "exec", Text: "interrupted: the harness stopped before this call finished", IsError: true, FullSize: 99, Synthetic: true}},
	{"tool result with an artifact under Go field names", events.KindToolResult,
		`{"artifact":{"ID":"a1","SessionID":"s-1","Path":"report.md","SHA256":"ab12","Size":17000000,"SourceEvent":7,"Classification":"untrusted",` +
			`"ExpiresAt":"2026-12-06T10:00:00Z","SnapshotID":"snap-1","SandboxID":"tf-s-1-1","Commands":["python3 make.py"],"Content":null,` +
			`"CreatedAt":"2026-11-29T10:00:00Z"},"full_size":10,"id":"c2","is_error":false,"name":"offer_artifact","text":"offered","truncated":false}`,
		events.ToolResult{ID: "c2", Name: "offer_artifact", Text: "offered", FullSize: 10, Artifact: &events.Artifact{ID: "a1", Path: "report.md", SHA256: "ab12",
			Size: 17000000, SourceEvent: 7, Classification: "untrusted", ExpiresAt: expires, SnapshotID: "snap-1", SandboxID: "tf-s-1-1",
			Commands: []string{"python3 make.py"}, CreatedAt: created}}},
	{"cancelled", events.KindCancelled, `{"reason":"cancelled by the caller","run_id":"r-1"}`, events.Cancelled{RunID: "r-1", Reason: "cancelled by the caller"}},
	{"error", events.KindError, `{"message":"model unavailable","where":"model"}`, events.Error{Message: "model unavailable", Where: "model"}},
	{"max turns", events.KindLimit, `{"limit":"max_turns","value":50}`, events.Limit{Limit: "max_turns", Value: 50}},
	{"token budget", events.KindLimit, `{"limit":"token_budget","used":1200,"value":1000}`, events.Limit{Limit: "token_budget", Value: 1000, Used: 1200}},
	{"run interrupted", events.KindRunInterrupted, `{"owner":"h:1:2","reason":"its harness process stopped mid-run","run_id":"r-0"}`,
		events.RunInterrupted{RunID: "r-0", Owner: "h:1:2", Reason: "its harness process stopped mid-run"}},
	{"run finished", events.KindRunFinished, `{"detail":"","input_tokens":120,"output_tokens":8,"run_id":"r-1","status":"completed","steps":2}`,
		events.RunFinished{RunID: "r-1", Status: "completed", InputTokens: 120, OutputTokens: 8, Steps: 2}},
	{"provisioned, as a map (limits_enforced without unenforced_limits)", events.KindSandboxProvisioned,
		`{"environment":"default","generation":1,"limits":{"CPU":1,"MemoryMB":1024,"DiskMB":3072},"limits_enforced":true,` +
			`"network":{"allow_domains":null,"block_all":false,"mode":"egress proxy"},"provider":"local","provider_type":"local",` +
			`"reason":"first call that needs a sandbox","sandbox_id":"tf-s-1-1","snapshot_id":"snap-1","took_ms":24}`,
		events.SandboxProvisioned{SandboxID: "tf-s-1-1", Provider: "local", ProviderType: "local", Environment: "default", SnapshotID: "snap-1",
			Generation: 1, Reason: "first call that needs a sandbox", TookMS: 24, Limits: sandbox.Limits{CPU: 1, MemoryMB: 1024, DiskMB: 3072},
			LimitsEnforced: true, Network: map[string]any{"allow_domains": nil, "block_all": false, "mode": "egress proxy"}}},
	{"provisioned with unenforced limits", events.KindSandboxProvisioned,
		`{"sandbox_id":"tf-s-1-2","provider":"local","provider_type":"local","environment":"default","snapshot_id":"snap-1","generation":2,` +
			`"reason":"the previous sandbox was lost or deleted; workspace reset","took_ms":30,"limits":{"CPU":1,"MemoryMB":1024,"DiskMB":3072},` +
			`"limits_enforced":false,"unenforced_limits":[{"limit":"cpu","reason":"no writable cgroup"}],"network":{"mode":"blocked"}}`,
		events.SandboxProvisioned{SandboxID: "tf-s-1-2", Provider: "local", ProviderType: "local", Environment: "default", SnapshotID: "snap-1",
			Generation: 2, Reason: "the previous sandbox was lost or deleted; workspace reset", TookMS: 30,
			Limits:           sandbox.Limits{CPU: 1, MemoryMB: 1024, DiskMB: 3072},
			UnenforcedLimits: []sandbox.UnenforcedLimit{{Limit: "cpu", Reason: "no writable cgroup"}}, Network: map[string]any{"mode": "blocked"}}},
	{"provisioned under a rollout, from the previous version", events.KindSandboxProvisioned,
		`{"sandbox_id":"tf-s-2-1","provider":"local","provider_type":"local","environment":"default","snapshot_id":"snap-0","generation":1,` +
			`"reason":"first call that needs a sandbox","took_ms":21,"limits":{"CPU":1,"MemoryMB":1024,"DiskMB":3072},` +
			`"limits_enforced":true,"network":{"mode":"blocked"},"version":"previous","rollout_percent":30}`,
		events.SandboxProvisioned{SandboxID: "tf-s-2-1", Provider: "local", ProviderType: "local", Environment: "default", SnapshotID: "snap-0",
			Generation: 1, Reason: "first call that needs a sandbox", TookMS: 21, Limits: sandbox.Limits{CPU: 1, MemoryMB: 1024, DiskMB: 3072},
			LimitsEnforced: true, Network: map[string]any{"mode": "blocked"}, Version: "previous", RolloutPercent: 30}},
	{"resumed", events.KindSandboxResumed,
		`{"from":"Stopped","recorded_snapshot_id":"snap-1","recorded_state":"stopped","sandbox_id":"tf-s-1-1","snapshot_id":"snap-1"}`,
		events.SandboxResumed{SandboxID: "tf-s-1-1", From: "Stopped", RecordedState: "stopped", SnapshotID: "snap-1", RecordedSnapshotID: "snap-1"}},
	{"stopped", events.KindSandboxStopped, `{"from":"running","idle_minutes":15,"sandbox_id":"tf-s-1-1","snapshot_id":"snap-1"}`,
		events.SandboxIdle{State: "stopped", SandboxID: "tf-s-1-1", From: "running", IdleMinutes: 15, SnapshotID: "snap-1"}},
	{"archived", events.KindSandboxArchived, `{"from":"stopped","idle_minutes":1440,"sandbox_id":"tf-s-1-1","snapshot_id":"snap-1"}`,
		events.SandboxIdle{State: "archived", SandboxID: "tf-s-1-1", From: "stopped", IdleMinutes: 1440, SnapshotID: "snap-1"}},
	{"deleted after a loss", events.KindSandboxDeleted, `{"backend_status":"gone","from":"lost","idle_minutes":10080,"sandbox_id":"tf-s-1-1","snapshot_id":"snap-1"}`,
		events.SandboxIdle{State: "deleted", SandboxID: "tf-s-1-1", From: "lost", IdleMinutes: 10080, SnapshotID: "snap-1", BackendStatus: "gone"}},
	{"lost, seen by a call (status/cause)", events.KindSandboxLost,
		`{"cause":"exec failed: sandbox tf-s-1-1 is lost","sandbox_id":"tf-s-1-1","status":"gone","uncertain":["(files written by: echo x > out.txt)"]}`,
		events.SandboxLost{SandboxID: "tf-s-1-1", State: "running", BackendStatus: "gone", Reason: "exec failed: sandbox tf-s-1-1 is lost",
			Uncertain: []string{"(files written by: echo x > out.txt)"}}},
	{"lost, found gone (state/reason)", events.KindSandboxLost, `{"reason":"the backend no longer has it","sandbox_id":"tf-s-1-1","state":"stopped"}`,
		events.SandboxLost{SandboxID: "tf-s-1-1", State: "stopped", Reason: "the backend no longer has it"}},
	{"recovered", events.KindSandboxRecovered, `{"sandbox_id":"tf-s-1-1","uncertain":null}`, events.SandboxRecovered{SandboxID: "tf-s-1-1"}},
	{"reclaimed", events.KindSandboxReclaimed, `{"dead_owner":"h:1:2","reason":"commands left running by a harness that died were stopped; files kept","sandbox_id":"tf-s-1-1"}`,
		events.SandboxReclaimed{SandboxID: "tf-s-1-1", DeadOwner: "h:1:2", Reason: "commands left running by a harness that died were stopped; files kept"}},
	{"network reattached (no longer recorded)", events.KindSandboxNetworkReattached,
		`{"reason":"the egress proxy was recreated in this harness process; the sandbox was restarted to reach it (files kept)","sandbox_id":"tf-s-1-1"}`,
		events.SandboxNetworkReattached{SandboxID: "tf-s-1-1", Reason: "the egress proxy was recreated in this harness process; the sandbox was restarted to reach it (files kept)"}},
	{"egress denied", events.KindEgress,
		`{"time":"2026-11-29T10:00:00Z","sandbox":"tf-s-1-1","allowed":false,"reason":"not_allowed","mode":"plain","host":"evil.test","port":"80","method":"GET","path":"/","message":"evil.test is not in allow_domains"}`,
		events.Egress{Time: created, Sandbox: "tf-s-1-1", Reason: "not_allowed", Mode: "plain", Host: "evil.test", Port: "80", Method: "GET", Path: "/",
			Message: "evil.test is not in allow_domains"}},
	{"egress allowed with a secret", events.KindEgress,
		`{"time":"2026-11-29T10:00:00Z","sandbox":"tf-s-1-1","allowed":true,"mode":"terminate","host":"api.test","port":"443","method":"POST","path":"/v1","addr":"127.0.0.1:443","secrets":["API_KEY"]}`,
		events.Egress{Time: created, Sandbox: "tf-s-1-1", Allowed: true, Mode: "terminate", Host: "api.test", Port: "443", Method: "POST", Path: "/v1",
			Addr: "127.0.0.1:443", Secrets: []string{"API_KEY"}}},
	{"mcp call from a script, allowed by a policy rule", events.KindMCPCall,
		`{"tool_call_id":"c1","call":2,"user":"alice","agent":"helper","tool":"weather__forecast","args_sha256":"ab12","outcome":"completed","rule":-1,"result_bytes":120,"duration_ms":4}`,
		events.MCPCall{ToolCallID: "c1", Call: 2, User: "alice", Agent: "helper", Tool: "weather__forecast", ArgsSHA256: "ab12",
			Outcome: events.OutcomeCompleted, Rule: ptr(-1), ResultBytes: 120, DurationMS: 4}},
	{"mcp call that ended after its script was cancelled", events.KindMCPCall,
		`{"tool_call_id":"c1","call":1,"user":"bob","agent":"helper","tool":"db__slow","args_sha256":"cd34","outcome":"failed","error":"connection reset","result_bytes":0,"duration_ms":900,"late":true}`,
		events.MCPCall{ToolCallID: "c1", Call: 1, User: "bob", Agent: "helper", Tool: "db__slow", ArgsSHA256: "cd34",
			Outcome: events.OutcomeFailed, Error: "connection reset", DurationMS: 900, Late: true}},
}

func ptr[T any](v T) *T { return &v }
