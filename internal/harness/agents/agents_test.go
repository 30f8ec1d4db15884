package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func TestLoadSaysClearlyWhatIsMissingOrNotReady(t *testing.T) {
	st := harnesstest.NewStore(t)
	ctx := context.Background()
	_, err := agents.Load(ctx, st, "ghost")
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), `"ghost"`) || !strings.Contains(err.Error(), "terraform apply") {
		t.Fatalf("missing agent: %v", err)
	}
	if err := st.CreateSandboxProvider(ctx, store.SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: "o"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.ClaimSnapshot(ctx, store.Snapshot{ID: "snap-b", Provider: "local", BuildHash: "h", Spec: "{}"}, "Building", "Failed"); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateEnvironment(ctx, store.Environment{ID: "e", Name: "py", Provider: "local", Owner: "o", Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h", SnapshotID: "snap-b"}); err != nil {
		t.Fatal(err)
	}
	harnesstest.AddAgent(t, st, "a", "py", harnesstest.AgentSpec{"model": harnesstest.Script(), "sandbox": harnesstest.Sandbox("py", 1, 2, 3)})
	_, err = agents.Load(ctx, st, "a")
	if !errors.Is(err, agents.ErrNotReady) || !strings.Contains(err.Error(), `environment "py" is Building, not Ready`) {
		t.Fatalf("building environment: %v", err)
	}
	if err := st.SetSnapshotState(ctx, "snap-b", "Failed", "build script exited 1", ""); err != nil {
		t.Fatal(err)
	}
	_, err = agents.Load(ctx, st, "a")
	if !errors.Is(err, agents.ErrNotReady) || !strings.Contains(err.Error(), "Failed") || !strings.Contains(err.Error(), "exited 1") {
		t.Fatalf("failed environment: %v", err)
	}
	if err := st.SetSnapshotState(ctx, "snap-b", "Ready", "", ""); err != nil {
		t.Fatal(err)
	}
	a, err := agents.Load(ctx, st, "a")
	if err != nil {
		t.Fatal(err)
	}
	if a.MaxTurns() != agents.DefaultMaxTurns || a.TokenBudget() != agents.DefaultTokenBudget || !a.IsReplay() {
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
	if _, err := a.NewModel(agents.ModelOptions{}); err == nil || !strings.Contains(err.Error(), "openai, anthropic, scripted") {
		t.Errorf("unknown provider: %v", err)
	}
}

// The limits the provider publishes as spec fields max_turns and token_budget are the
// agent's (internal/provider/agent_spec.go writes them under these names).
func TestSpecLimitsAreRead(t *testing.T) {
	var s agents.Spec
	if err := json.Unmarshal([]byte(`{"name":"a","max_turns":7,"token_budget":1234}`), &s); err != nil {
		t.Fatal(err)
	}
	a := &agents.Agent{Spec: s}
	if a.MaxTurns() != 7 || a.TokenBudget() != 1234 {
		t.Fatalf("MaxTurns %d TokenBudget %d; want 7 and 1234", a.MaxTurns(), a.TokenBudget())
	}
}
