package agents_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func TestLoadSaysClearlyWhatIsMissingOrNotReady(t *testing.T) {
	st := harnesstest.NewStore(t)
	ctx := context.Background()
	_, err := agents.Load(ctx, st, "ghost")
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), `"ghost"`) || !strings.Contains(err.Error(), "terraform apply") {
		t.Fatalf("missing agent: %v", err)
	}
	harnesstest.AddEnvironment(t, st, "py", "Building")
	harnesstest.AddAgent(t, st, "a", "py", harnesstest.AgentSpec{"model": harnesstest.Script(), "sandbox": harnesstest.Sandbox("py", 1, 2, 3)})
	_, err = agents.Load(ctx, st, "a")
	if !errors.Is(err, agents.ErrNotReady) || !strings.Contains(err.Error(), `environment "py" is Building, not Ready`) {
		t.Fatalf("building environment: %v", err)
	}
	if err := st.SetSnapshotState(ctx, "snap-py", "Failed", "build script exited 1", ""); err != nil {
		t.Fatal(err)
	}
	_, err = agents.Load(ctx, st, "a")
	if !errors.Is(err, agents.ErrNotReady) || !strings.Contains(err.Error(), "Failed") || !strings.Contains(err.Error(), "exited 1") {
		t.Fatalf("failed environment: %v", err)
	}
	if err := st.SetSnapshotState(ctx, "snap-py", "Ready", "", ""); err != nil {
		t.Fatal(err)
	}
	a, err := agents.Load(ctx, st, "a")
	if err != nil {
		t.Fatal(err)
	}
	if a.MaxTurns() != agentspec.DefaultMaxTurns || a.TokenBudget() != agentspec.DefaultTokenBudget || !a.IsReplay() {
		t.Fatalf("defaults: %d %d %v", a.MaxTurns(), a.TokenBudget(), a.IsReplay())
	}
}

func TestScriptedModelRejectsBadScripts(t *testing.T) {
	for script, want := range map[string]string{
		"": "model.script is empty",
		`{"turns": [{"tool_calls": [{"args": 1}]}]}`: "not a valid replay",
		`{"turns": [{"tool_calls": [{}]}]}`:          "turns[0].tool_calls[0].name is empty",
	} {
		a := &agents.Agent{Name: "x", Spec: agents.Spec{Model: agents.ModelSpec{Provider: "scripted", Script: script}}}
		if _, err := a.NewModel(agents.ModelOptions{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("script %q: %v; want %q", script, err, want)
		}
	}
	a := &agents.Agent{Name: "x", Spec: agents.Spec{Model: agents.ModelSpec{Provider: "gemini"}}}
	if _, err := a.NewModel(agents.ModelOptions{}); err == nil || !strings.Contains(err.Error(), "anthropic, openai, scripted") {
		t.Errorf("unknown provider: %v", err)
	}
}

// The limits the provider publishes as spec fields max_turns and token_budget are the
// agent's.
func TestSpecLimitsAreRead(t *testing.T) {
	st := harnesstest.NewStore(t)
	harnesstest.AddAgent(t, st, "a", "", harnesstest.AgentSpec{"model": harnesstest.Script(), "max_turns": 7, "token_budget": 1234})
	a, err := agents.Load(context.Background(), st, "a")
	if err != nil {
		t.Fatal(err)
	}
	if a.MaxTurns() != 7 || a.TokenBudget() != 1234 {
		t.Fatalf("MaxTurns %d TokenBudget %d; want 7 and 1234", a.MaxTurns(), a.TokenBudget())
	}
}

// Specs stored by earlier providers (their own JSON type, before agentspec; the oldest
// without max_turns and token_budget) load with the values they were written with, and
// the defaults for what they lack.
func TestOldStoredSpecsLoad(t *testing.T) {
	env := harnesstest.NewStore(t)
	harnesstest.AddEnvironment(t, env, "py", "Ready")
	ctx := context.Background()
	rows := map[string]string{
		"coder": `{"name":"coder","instructions":"Be brief.","model":{"provider":"openai","name":"gpt-4.1","api_key_env":"OPENAI_API_KEY"},` +
			`"mcp_servers":[{"name":"docs","url":"http://docs.internal:8080/mcp","allowed_tools":[]}],"skills":null,"code_mode":false,` +
			`"sandbox":{"enabled":true,"environment":"py","file_downloads":false,"idle_stop_minutes":30,"archive_after_minutes":1440,"delete_after_minutes":10080},` +
			`"max_turns":12,"token_budget":200000}`,
		"qa": `{"name":"qa","model":{"provider":"scripted","script":"[]"},"mcp_servers":null,"skills":null,"code_mode":false,` +
			`"sandbox":{"enabled":false,"environment":"default","file_downloads":true,"idle_stop_minutes":15,"archive_after_minutes":1440,"delete_after_minutes":10080}}`,
	}
	for name, spec := range rows {
		ref := ""
		if name == "coder" {
			ref = "py"
		}
		if err := env.CreateAgent(ctx, store.Agent{ID: "agent-" + name, Name: name, Owner: harnesstest.Owner, Environment: ref, Spec: []byte(spec)}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]agents.Spec{
		"coder": {Name: "coder", Instructions: "Be brief.", Model: agents.ModelSpec{Provider: "openai", Name: "gpt-4.1", APIKeyEnv: "OPENAI_API_KEY"},
			MCPServers: []agents.MCPServer{{Name: "docs", URL: "http://docs.internal:8080/mcp"}},
			Sandbox:    agents.SandboxSpec{Enabled: true, Environment: "py", IdleStopMinutes: 30, ArchiveAfterMinutes: 1440, DeleteAfterMinutes: 10080},
			MaxTurns:   12, TokenBudget: 200000},
		"qa": {Name: "qa", Model: agents.ModelSpec{Provider: "scripted", Script: "[]"}, Sandbox: agentspec.DefaultSandbox(), MaxTurns: 50, TokenBudget: 1_000_000},
	}
	for name, w := range want {
		w.CodeLimits = agentspec.DefaultCodeModeLimits() // specs older than code_mode_limits get the defaults
		a, err := agents.Load(ctx, env, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(a.Spec, w) {
			t.Errorf("%s: loaded\n%+v\nwant\n%+v", name, a.Spec, w)
		}
		if wantEnv := map[string]string{"coder": "py"}[name]; a.Environment.Name != wantEnv || (wantEnv == "") != (a.Provider.Name == "") {
			t.Errorf("%s: environment %q, provider %q; want environment %q and its provider", name, a.Environment.Name, a.Provider.Name, wantEnv)
		}
	}
}

// A Q&A agent (sandbox off, as the provider stores one: no environment referenced) runs
// on a control plane with no sandbox provider at all: Load reads no environment, and a
// turn is answered without provisioning anything.
func TestQAAgentRunsWithoutASandboxProvider(t *testing.T) {
	st := harnesstest.NewStore(t)
	ctx := context.Background()
	harnesstest.AddAgent(t, st, "qa", "", harnesstest.AgentSpec{"model": harnesstest.Script(map[string]any{"text": "Paris."})})
	// Off, naming an environment that does not exist: it is never resolved.
	harnesstest.AddAgent(t, st, "off", "ghost", harnesstest.AgentSpec{"model": harnesstest.Script(map[string]any{"text": "Lyon."}),
		"sandbox": map[string]any{"enabled": false}})
	for agent, answer := range map[string]string{"qa": "Paris.", "off": "Lyon."} {
		a, err := agents.Load(ctx, st, agent)
		if err != nil {
			t.Fatalf("%s: %v", agent, err)
		}
		if a.Spec.Sandbox.Enabled || a.Environment.Name != "" || a.Provider.Name != "" || a.Snapshot.ID != "" {
			t.Fatalf("%s: loaded %+v; want no sandbox, environment, provider or snapshot", agent, a)
		}
		m, err := a.NewModel(agents.ModelOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r := &runner.Runner{Store: st, Agent: a, Model: m, Tools: &tools.Executor{Store: st}}
		sid, err := r.NewSession(ctx, harnesstest.Owner)
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Run(ctx, sid, "Where is the Louvre?", nil)
		if err != nil || out.Status != store.RunCompleted || out.Text != answer {
			t.Fatalf("%s: run %+v, %v; want %q, completed", agent, out, err, answer)
		}
		if _, err := st.GetSessionSandbox(ctx, sid); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s: session sandbox: %v; want none", agent, err)
		}
	}
	if p, err := st.OnlySandboxProvider(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("sandbox provider %+v, %v; want none on this control plane", p, err)
	}
}
