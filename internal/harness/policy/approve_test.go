package policy

import (
	"strings"
	"testing"
	"time"
)

// The product documents' example: a separate approval before any external pull
// request is created, by the caller or a lead.
func TestDecideApprove(t *testing.T) {
	p := load(t, `{"rules": [
	  {"effect": "approve", "servers": ["https://api.githubcopilot.com"], "tools": ["create_pull_request"], "approvers": ["$caller", "lead_*"], "timeout": "30m",
	   "reason": "external pull requests need a second look"},
	  {"effect": "approve", "owners": ["ops"], "approvers": ["oncall"]},
	  {"effect": "allow"}
	], "default": "deny"}`)
	const gh = "https://api.githubcopilot.com/mcp/"
	d := p.Decide(Request{User: "ann", Owner: "team", Agent: "pr-bot", Server: gh, Tool: "create_pull_request"})
	want := Decision{Allow: false, Effect: EffectApprove, Rule: 0, Reason: "external pull requests need a second look"}
	if d.Approval == nil || d.Allow != want.Allow || d.Effect != want.Effect || d.Rule != want.Rule || d.Reason != want.Reason {
		t.Fatalf("%+v, want %+v with an approval", d, want)
	}
	if strings.Join(d.Approval.Approvers, " ") != "$caller lead_*" || d.Approval.Timeout != 30*time.Minute {
		t.Errorf("approval %+v", *d.Approval)
	}
	// The decision's approval is its own: changing it changes no later decision.
	d.Approval.Approvers[0] = "mallory"
	d.Approval.Timeout = time.Hour
	again := p.Decide(Request{User: "ann", Server: gh, Tool: "create_pull_request"})
	if again.Approval.Approvers[0] != "$caller" || again.Approval.Timeout != 30*time.Minute {
		t.Errorf("a caller changed the rule: %+v", *again.Approval)
	}

	d = p.Decide(Request{User: "ann", Owner: "ops", Server: gh, Tool: "list_issues"})
	if d.Allow || d.Effect != EffectApprove || d.Rule != 1 || d.Reason != "rule 1 of the policy (approve)" ||
		d.Approval == nil || d.Approval.Timeout != DefaultApprovalTimeout {
		t.Errorf("the default timeout: %+v", d)
	}
	d = p.Decide(Request{User: "ann", Owner: "team", Server: gh, Tool: "list_issues"})
	if !d.Allow || d.Effect != EffectAllow || d.Approval != nil {
		t.Errorf("an allowed call: %+v", d)
	}
}

func TestMayDecide(t *testing.T) {
	rule := &ApprovalRule{Approvers: []string{"$caller", "lead_*", `\$admin`}}
	for _, c := range []struct {
		user, caller string
		want         bool
	}{
		{"ann", "ann", true},           // $caller: the session's own user
		{"bob", "ann", false},          // another user is not the caller
		{"lead_kim", "ann", true},      // a pattern
		{"lead_kim", "lead_kim", true}, // both
		{"leader", "ann", false},       // patterns are anchored
		{"$admin", "ann", true},        // a literal "$"
		{"$caller", "ann", false},      // "$caller" is not a user name
		{"", "", false},                // an empty user never decides, even as the caller
		{"", "ann", false},             //
		{"ann", "", false},             // no caller: $caller is no one
		{"LEAD-kim", "ann", false},     // patterns match with case
		{"lead_kim/../x", "ann", true}, // "*" crosses "/", as everywhere
	} {
		if got := rule.MayDecide(c.user, c.caller); got != c.want {
			t.Errorf("rule: %q deciding %q's call: %v, want %v", c.user, c.caller, got, c.want)
		}
		if got := MayDecide(rule.Approvers, c.user, c.caller); got != c.want {
			t.Errorf("stored: %q deciding %q's call: %v, want %v", c.user, c.caller, got, c.want)
		}
	}
	var none *ApprovalRule
	if none.MayDecide("ann", "ann") {
		t.Error("a nil rule let someone decide")
	}
	// A stored pattern that no longer compiles fails closed.
	if MayDecide([]string{"[a-"}, "a", "b") || MayDecide(nil, "a", "a") {
		t.Error("a broken or empty approver list let someone decide")
	}
	// "*" lets anyone with a name decide, the caller included.
	if !MayDecide([]string{"*"}, "ann", "ann") || MayDecide([]string{"*"}, "", "ann") {
		t.Error(`"*"`)
	}
}

// Every mistake in approvers and timeout names the rule and the field and says what to
// write.
func TestApproveLoadErrors(t *testing.T) {
	const pr = `"servers": ["https://api.githubcopilot.com"], "tools": ["create_pull_request"]`
	for _, c := range []struct {
		rule string
		want []string
	}{
		{`{"effect": "approve", ` + pr + `}`, []string{`rules[0].approvers is missing: an "approve" rule names who may approve`, `"approvers": ["$caller", "lead_*"]`}},
		{`{"effect": "approve", "approvers": []}`, []string{`rules[0].approvers is an empty list, so no one could approve`}},
		{`{"effect": "approve", "approvers": "lead"}`, []string{`rules[0].approvers must be a list of user patterns, like ["$caller", "lead_*"], not "lead"`}},
		{`{"effect": "approve", "approvers": null}`, []string{`rules[0].approvers must be a list of user patterns`}},
		{`{"effect": "approve", "approvers": ["$user"]}`, []string{`rules[0].approvers[0] "$user": the only "$" name is "$caller"`, `"\\$user"`}},
		{`{"effect": "approve", "approvers": ["$caller", "[a-"]}`, []string{`rules[0].approvers[1] "[a-": a "[" class is not closed`}},
		{`{"effect": "approve", "approvers": [""]}`, []string{`rules[0].approvers[0] "": an empty pattern`}},
		{`{"effect": "approve", "approvers": ["$caller"], "timeout": 600}`, []string{`rules[0].timeout must be a duration string, like "timeout": "30m", not 600`}},
		{`{"effect": "approve", "approvers": ["$caller"], "timeout": "10"}`, []string{`rules[0].timeout "10" is not a duration: write a number with a unit, like "30m"`}},
		{`{"effect": "approve", "approvers": ["$caller"], "timeout": "500ms"}`, []string{`rules[0].timeout "500ms": a call waits for approval from 1s to 24h0m0s; leave "timeout" out for 10m0s`}},
		{`{"effect": "approve", "approvers": ["$caller"], "timeout": "25h"}`, []string{`rules[0].timeout "25h": a call waits for approval from 1s to 24h0m0s`}},
		{`{"effect": "approve", "approvers": ["$caller"], "timeout": "-1m"}`, []string{`rules[0].timeout "-1m": a call waits for approval from 1s`}},
		{`{"effect": "deny", "approvers": ["lead"]}`, []string{`rules[0].approvers: only an "approve" rule waits for approvers, and this rule's effect is "deny": remove "approvers", or make the rule "effect": "approve"`}},
		{`{"effect": "allow", "timeout": "5m"}`, []string{`rules[0].timeout: only an "approve" rule waits for approvers, and this rule's effect is "allow": remove "timeout"`}},
		{`{"effect": "approve", "approvers": ["$caller"], "approver": ["x"]}`, []string{`rules[0]."approver" is not a field of a rule; did you mean "approvers"?`, "fields: effect, users, owners, agents, servers, tools, args, reason, approvers, timeout"}},
		{`{"effect": "approve", "approvers": ["$caller"], "timout": "5m"}`, []string{`did you mean "timeout"?`}},
		{`{"effect": "aprove", "approvers": ["$caller"]}`, []string{`rules[0].effect is "aprove": it must be "allow" or "deny" (or "approve", with "approvers")`}},
		{`{"approvers": ["$caller"]}`, []string{`rules[0].effect is missing: add "effect": "allow", "effect": "deny" or "effect": "approve" (with "approvers")`}},
	} {
		text := `{"default": "deny", "rules": [` + c.rule + `]}`
		path := write(t, text)
		_, err := Load(path)
		if err == nil {
			t.Errorf("%s: loaded", c.rule)
			continue
		}
		for _, w := range append(c.want, "policy "+path+": ") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s:\n  error %q\n  lacks %q", c.rule, err, w)
			}
		}
	}
	_, err := Load(write(t, `{"default": "approve"}`))
	if err == nil || !strings.Contains(err.Error(), `default is "approve": it must be "allow" or "deny", since who approves is a rule's to say`) {
		t.Errorf(`"default": "approve": %v`, err)
	}
	// The bounds themselves are accepted.
	for _, timeout := range []string{"1s", "24h", "1h30m"} {
		load(t, `{"default": "deny", "rules": [{"effect": "approve", "approvers": ["$caller"], "timeout": "`+timeout+`"}]}`)
	}
}
