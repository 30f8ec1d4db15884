package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/codemode"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
)

// From Code Mode, the operator's rule on the server's URL holds whatever the agent and
// the server are called: an agent renamed and publishing the kb server as "fx" is
// refused the denied tool from its script (nothing sent; the refusal and its rule are
// recorded), and its other tool still answers.
func TestCodeModePolicyHoldsWhenTheServerAndTheAgentAreRenamed(t *testing.T) {
	f := newFixture(t)
	kb := newKB(t, "tok")
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, []byte(`{"rules": [
	  {"effect": "deny", "servers": ["`+kb.URL+`"], "tools": ["forecast"], "reason": "no forecasts from kb"}
	], "default": "allow"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	code := `try:
    print("forecast", fx.forecast(city="Rome")["temp_c"])
except ToolError as e:
    print("refused:", e)
print("population", fx.population(city="Rome"))`
	harnesstest.AddAgent(t, f.env.Store, "renamed-helper", "default", harnesstest.AgentSpec{
		"model":       harnesstest.Script(runCode(codemode.Python, code), text("done")),
		"mcp_servers": []any{map[string]any{"name": "fx", "url": kb.URL, "credential_env": "TF_TEST_KB_TOKEN"}},
		"sandbox":     harnesstest.Sandbox("default", 15, 60, 120),
		"code_mode":   true,
	})
	r, _ := f.codeRunner(t, "renamed-helper", harnesstest.Owner, pol)
	sid, _ := r.NewSession(context.Background(), harnesstest.Owner)
	mustRun(t, r, sid, "weather?")
	out := results(t, f.env.Store, sid)[0]["text"].(string)
	if !strings.Contains(out, "refused:") || !strings.Contains(out, "no forecasts from kb") || !strings.Contains(out, "population 2100000") {
		t.Fatalf("the script's output %q; want forecast refused by the rule and population answered", out)
	}
	calls := harnesstest.Payloads(t, f.env.Store, sid, events.KindMCPCall)
	if len(calls) != 2 || calls[0]["outcome"] != events.OutcomeDenied || calls[0]["rule"] != 0.0 || calls[1]["outcome"] != events.OutcomeCompleted {
		t.Fatalf("mcp_call records %v; want forecast denied by rule 0, population completed", calls)
	}
	if got := kb.seenUsers(); len(got) != 1 {
		t.Fatalf("the kb server answered %d tool calls; want only population", len(got))
	}
}
