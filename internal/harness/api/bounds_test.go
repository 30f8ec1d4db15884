package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
)

// A spec written to the store past the provider's bounds gets no session: 422
// agent_not_ready naming the field and the fix, not a 500.
func TestCreateSessionRefusesASpecPastTheBounds(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	s := agentspec.Default("greedy")
	s.Model = agentspec.Model{Provider: agentspec.ModelScripted, Script: new(script(text("hi"))["script"].(string))}
	s.MaxTurns = 5000
	harnesstest.StoreSpec(t, f.st, s)
	r := f.req("POST", "/api/v1/sessions", "alice", map[string]any{"agent": "greedy"})
	want(t, "a session of an agent past the bounds", r, http.StatusUnprocessableEntity, api.CodeAgentNotReady)
	if !strings.Contains(r.errMessage(), "max_turns is 5000") || !strings.Contains(r.errMessage(), "apply the agent again") {
		t.Fatalf("message: %s", r.body)
	}
}
