package main

import (
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
)

// The bypass of issue 23: the operator's policy denies the facts server's capital tool
// by the server's URL. The author who first published it as "facts" is refused; so is
// another agent, under another name, publishing the same server as "fx" (and a
// different URL spelling of it): the server never sees the call. Another tool of the
// server, and the same tool name on another server, still go through.
func TestPolicyHoldsWhenTheServerAndTheAgentAreRenamed(t *testing.T) {
	facts, other := newListener(t), newListener(t)
	pol := writeFile(t, "policy.json", `{"rules": [
	  {"effect": "deny", "servers": ["`+facts.URL+`"], "tools": ["capital"], "reason": "the facts server's capital is off limits"}
	], "default": "allow"}`)
	st := seed(t)
	agent := func(server, url string) map[string]any {
		return map[string]any{
			"model":       harnesstest.Script(map[string]any{"tool_calls": []any{map[string]any{"name": server + "__capital", "arguments": map[string]any{"city": "France"}}}}, map[string]any{"text": "done"}),
			"mcp_servers": []any{map[string]any{"name": server, "url": url}},
		}
	}
	harnesstest.AddAgent(t, st, "facts-agent", "", agent("facts", facts.URL+"/mcp"))
	harnesstest.AddAgent(t, st, "innocent-helper", "", agent("fx", facts.URL+"/mcp"))
	harnesstest.AddAgent(t, st, "spelled-otherwise", "", agent("fy", strings.Replace(facts.URL, "http://", "HTTP://", 1)+"/other/path"))
	harnesstest.AddAgent(t, st, "another-server", "", agent("facts", other.URL+"/mcp"))

	for _, a := range []string{"facts-agent", "innocent-helper", "spelled-otherwise"} {
		out, _, err := run(t, st.Path(), "", "--policy", pol, "run", a, "capital of France?")
		if err != nil {
			t.Fatalf("%s: %v\n%s", a, err, out)
		}
		if !strings.Contains(out, "the facts server's capital is off limits") {
			t.Errorf("%s: the refusal is not in the output:\n%s", a, out)
		}
	}
	if got := facts.toolCalls(); len(got) != 0 {
		t.Fatalf("the facts server answered %q despite the rule on its URL", got)
	}
	if out, _, err := run(t, st.Path(), "", "--policy", pol, "run", "another-server", "capital of France?"); err != nil || len(other.toolCalls()) != 1 {
		t.Fatalf("the same tool name on another server: %v, calls %q\n%s", err, other.toolCalls(), out)
	}
}
