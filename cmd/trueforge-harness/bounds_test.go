package main

import (
	"context"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
)

// Issue 23: max_turns 5000 set with psql ran 1,101 steps. A spec written to the store
// past the provider's bounds is refused by run before any model call or session, with
// the field, the bound and the fix named.
func TestRunRefusesASpecPastTheProvidersBounds(t *testing.T) {
	st := harnesstest.NewStore(t)
	s := agentspec.Default("greedy")
	script := harnesstest.Script(map[string]any{"text": "a step"})
	s.Model = agentspec.Model{Provider: agentspec.ModelScripted, Script: new(script["script"].(string))}
	s.MaxTurns = 5000
	harnesstest.StoreSpec(t, st, s)
	out, _, err := run(t, st.Path(), "", "run", "greedy", "hi")
	if err == nil {
		t.Fatalf("an agent with max_turns 5000 ran:\n%s", out)
	}
	for _, want := range []string{`agent "greedy" cannot run`, "max_turns is 5000", "1 to 1000", "apply the agent again with max_turns"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if ss, _ := st.ListSessions(context.Background(), "", ""); len(ss) != 0 || strings.Contains(out, "a step") {
		t.Fatalf("the agent ran: %d sessions, output %q", len(ss), out)
	}
}
