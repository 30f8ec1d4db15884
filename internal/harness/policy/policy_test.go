package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func load(t *testing.T, text string) *Policy {
	t.Helper()
	p, err := Load(write(t, text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The example of the guide, decided for the calls it is written about.
func TestDecideFirstMatchWins(t *testing.T) {
	p := load(t, `{
	  "rules": [
	    {"effect": "deny", "users": ["bob"], "servers": ["https://api.githubcopilot.com"], "tools": ["delete_*"], "reason": "Bob may not delete on GitHub"},
	    {"effect": "deny", "servers": ["https://db.example.com"], "tools": ["query"], "args": {"database": ["prod*"]}},
	    {"effect": "allow", "servers": ["https://db.example.com", "https://api.githubcopilot.com/mcp/*"]},
	    {"effect": "allow", "users": ["ops-*"], "owners": ["ops"], "agents": ["oncall"]}
	  ],
	  "default": "deny"
	}`)
	const gh, db, pager = "https://api.githubcopilot.com/mcp/", "https://db.example.com/mcp", "https://pager.example.com"
	for _, c := range []struct {
		name string
		req  Request
		want Decision
	}{
		{"a deny rule with a reason", Request{User: "bob", Agent: "a", Server: gh, Tool: "delete_repo"},
			Decision{Allow: false, Effect: EffectDeny, Rule: 0, Reason: "Bob may not delete on GitHub"}},
		{"another user passes the deny to the allow", Request{User: "ann", Agent: "a", Server: gh, Tool: "delete_repo"},
			Decision{Allow: true, Effect: EffectAllow, Rule: 2, Reason: "rule 2 of the policy (allow)"}},
		{"bob's other tools", Request{User: "bob", Agent: "a", Server: gh, Tool: "list_repos"},
			Decision{Allow: true, Effect: EffectAllow, Rule: 2, Reason: "rule 2 of the policy (allow)"}},
		{"an argument matching", Request{User: "ann", Agent: "a", Server: db, Tool: "query", Args: map[string]any{"database": "prod-eu", "sql": "select 1"}},
			Decision{Allow: false, Effect: EffectDeny, Rule: 1, Reason: "rule 1 of the policy (deny)"}},
		{"an argument not matching", Request{User: "ann", Agent: "a", Server: db, Tool: "query", Args: map[string]any{"database": "staging"}},
			Decision{Allow: true, Effect: EffectAllow, Rule: 2, Reason: "rule 2 of the policy (allow)"}},
		{"an argument missing", Request{User: "ann", Agent: "a", Server: db, Tool: "query"},
			Decision{Allow: true, Effect: EffectAllow, Rule: 2, Reason: "rule 2 of the policy (allow)"}},
		{"users, owners and agents together", Request{User: "ops-kim", Owner: "ops", Agent: "oncall", Server: pager, Tool: "ack"},
			Decision{Allow: true, Effect: EffectAllow, Rule: 3, Reason: "rule 3 of the policy (allow)"}},
		{"the agent's name under another owner", Request{User: "ops-kim", Owner: "team_a", Agent: "oncall", Server: pager, Tool: "ack"},
			Decision{Allow: false, Effect: EffectDeny, Rule: -1, Reason: "no rule of the policy matched; its default is deny"}},
		{"the default", Request{User: "ops-kim", Owner: "ops", Agent: "other", Server: pager, Tool: "ack"},
			Decision{Allow: false, Effect: EffectDeny, Rule: -1, Reason: "no rule of the policy matched; its default is deny"}},
	} {
		if got := p.Decide(c.req); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// A servers pattern matches the server's URL however the agent spells it (case, the
// default port) and whatever the agent names it; an origin pattern never matches by
// a URL's path, and a pattern with a path matches the path.
func TestServersMatchTheURL(t *testing.T) {
	p := load(t, `{"rules": [
	  {"effect": "deny", "servers": ["https://facts.example.com"], "tools": ["capital"]},
	  {"effect": "deny", "servers": ["https://*.internal.example"]},
	  {"effect": "deny", "servers": ["http://127.0.0.1:8080/admin/*"]}
	], "default": "allow"}`)
	for _, c := range []struct {
		url, tool string
		rule      int
	}{
		{"https://facts.example.com/mcp", "capital", 0},
		{"HTTPS://Facts.Example.COM:443/other", "capital", 0},
		{"https://facts.example.com", "capital", 0},
		{"https://facts.example.com/mcp", "population", -1},
		{"http://facts.example.com/mcp", "capital", -1},
		{"https://facts.example.com:8443/mcp", "capital", -1},
		{"https://facts.example.com.evil.test/mcp", "capital", -1},
		{"https://a.internal.example/mcp", "x", 1},
		{"https://evil.test/.internal.example", "x", -1},
		{"http://127.0.0.1:8080/admin/mcp", "x", 2},
		{"http://127.0.0.1:8080/public/mcp", "x", -1},
		{"not a url", "capital", -1},
	} {
		if d := p.Decide(Request{Server: c.url, Tool: c.tool, Agent: "renamed"}); d.Rule != c.rule {
			t.Errorf("%s %s: rule %d, want %d", c.url, c.tool, d.Rule, c.rule)
		}
	}
}

// What an agent's author chooses cannot decide a rule alone: the old "<name>__<tool>"
// tools form and agents without owners are refused at Load, saying what to write.
func TestAuthorChosenConditionsRefused(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`{"default": "allow", "rules": [{"effect": "deny", "tools": ["facts__*"]}]}`, `rules[0].tools[0] "facts__*": tools match the server's own tool name`},
		{`{"default": "allow", "rules": [{"effect": "deny", "agents": ["evil"]}]}`, `rules[0].agents: an agent's name is chosen by whoever publishes the agent`},
		{`{"default": "allow", "rules": [{"effect": "deny", "servers": ["facts"]}]}`, `rules[0].servers[0] "facts": servers match the MCP server's URL`},
		{`{"default": "allow", "rules": [{"effect": "deny", "servers": []}]}`, `rules[0].servers is an empty list`},
	} {
		_, err := Load(write(t, c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.text, err, c.want)
		}
	}
	// A tool whose own name has "__" is written escaped.
	p := load(t, `{"default": "allow", "rules": [{"effect": "deny", "tools": ["a\\_\\_b"]}]}`)
	if d := p.Decide(Request{Tool: "a__b"}); d.Rule != 0 {
		t.Errorf("an escaped __: %+v", d)
	}
}

func TestDecideDefaults(t *testing.T) {
	var none *Policy
	if d := none.Decide(Request{User: "anyone", Tool: "x__y"}); !d.Allow || d.Rule != -1 {
		t.Errorf("no policy: %+v, want allowed", d)
	}
	if none.String() != "no policy" {
		t.Errorf("String of no policy: %q", none.String())
	}
	if d := load(t, `{"default": "allow"}`).Decide(Request{Tool: "x__y"}); !d.Allow || d.Rule != -1 {
		t.Errorf("no rules, default allow: %+v", d)
	}
	if d := load(t, `{"rules": [], "default": "deny"}`).Decide(Request{Tool: "x__y"}); d.Allow || d.Rule != -1 {
		t.Errorf("no rules, default deny: %+v", d)
	}
	// A rule without conditions matches every call.
	if d := load(t, `{"rules": [{"effect": "deny"}], "default": "allow"}`).Decide(Request{}); d.Allow || d.Rule != 0 {
		t.Errorf("a rule without conditions: %+v", d)
	}
}

func TestArgumentValuesAsText(t *testing.T) {
	p := load(t, `{"rules": [
	  {"effect": "deny", "args": {"n": ["42", "1.5"]}},
	  {"effect": "deny", "args": {"force": ["true"]}},
	  {"effect": "deny", "args": {"path": ["/etc/*"]}},
	  {"effect": "deny", "args": {"a": ["x"], "b": ["y"]}},
	  {"effect": "deny", "args": {"any": ["*"]}}
	], "default": "allow"}`)
	var fromJSON map[string]any
	_ = json.Unmarshal([]byte(`{"n": 42}`), &fromJSON)
	for _, c := range []struct {
		args map[string]any
		rule int
	}{
		{fromJSON, 0},
		{map[string]any{"n": 1.5}, 0},
		{map[string]any{"n": json.Number("42")}, 0},
		{map[string]any{"n": 42}, 0},
		{map[string]any{"n": 4.2}, -1},
		{map[string]any{"force": true}, 1},
		{map[string]any{"force": "true"}, 1},
		{map[string]any{"force": false}, -1},
		{map[string]any{"path": "/etc/ssl/certs/ca.pem"}, 2}, // "*" crosses "/"
		{map[string]any{"path": "/home/etc/x"}, -1},          // patterns are anchored
		{map[string]any{"a": "x"}, -1},                       // every argument condition must match
		{map[string]any{"a": "x", "b": "y"}, 3},
		{map[string]any{"any": ""}, 4},
		{map[string]any{"any": nil}, -1}, // null, objects and arrays have no text
		{map[string]any{"any": map[string]any{"x": 1}}, -1},
		{map[string]any{"any": []any{"x"}}, -1},
		{map[string]any{"path": []any{"/etc/passwd"}}, -1},
	} {
		if d := p.Decide(Request{Tool: "t", Args: c.args}); d.Rule != c.rule {
			t.Errorf("args %v: rule %d, want %d", c.args, d.Rule, c.rule)
		}
	}
}

// Every mistake names the file, the rule and the field, and says what to write.
func TestLoadErrors(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{``, []string{"the file is empty"}},
		{`{"rules": [}`, []string{"line 1, column 12"}},
		{"{\n  \"default\": \"allow\",\n  \"rules\": [\n    {\"effect\": \"deny\",}\n  ]\n}", []string{"line 4, column 23"}},
		{`[]`, []string{`one JSON object with "rules" and "default"`}},
		{`null`, []string{`not null`}},
		{`{"default": "allow"} {}`, []string{"text after the JSON object"}},
		{`{"rules": []}`, []string{`"default" is missing`, `"default": "deny"`}},
		{`{"default": "block"}`, []string{`default is "block": it must be "allow" or "deny"`}},
		{`{"default": "allow", "rule": []}`, []string{`"rule" is not a field of a policy file; did you mean "rules"?`}},
		{`{"default": "allow", "rules": {}}`, []string{`"rules" must be a list of rule objects`}},
		{`{"default": "allow", "rules": ["deny"]}`, []string{`rules[0]: a rule must be a JSON object`}},
		{`{"default": "allow", "rules": [{"effect": "allow"}, {"tools": ["x"]}]}`, []string{`rules[1].effect is missing`}},
		{`{"default": "allow", "rules": [{"effect": "Deny"}]}`, []string{`rules[0].effect is "Deny": it must be "allow" or "deny"`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "user": ["bob"]}]}`, []string{`rules[0]."user" is not a field of a rule; did you mean "users"?`, "fields: effect, users, owners, agents, servers, tools, args, reason"}},
		{`{"default": "allow", "rules": [{"effect": "deny", "Tools": ["x"]}]}`, []string{`did you mean "tools"?`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "priority": 1}]}`, []string{`rules[0]."priority" is not a field of a rule (fields:`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "users": "bob"}]}`, []string{`rules[0].users must be a list of patterns, like ["prod*"], not "bob"`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "users": []}]}`, []string{`rules[0].users is an empty list, which would match nothing`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "tools": ["ok", "[a-"]}]}`, []string{`rules[0].tools[1] "[a-": a "[" class is not closed`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "tools": ["[]"]}]}`, []string{`rules[0].tools[0] "[]": a "[]" class is empty`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "tools": ["[z-a]"]}]}`, []string{`rules[0].tools[0] "[z-a]"`, "invalid character class range"}},
		{`{"default": "allow", "rules": [{"effect": "deny", "owners": ["a\\"]}]}`, []string{`rules[0].owners[0] "a\\": it ends with a lone backslash`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "owners": [""]}]}`, []string{`rules[0].owners[0] "": an empty pattern`, `use "*"`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "args": ["database"]}]}`, []string{`rules[0].args must be an object of argument names to lists of patterns`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "args": {}}]}`, []string{`rules[0].args is empty`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "args": {"database": "prod"}}]}`, []string{`rules[0].args["database"] must be a list of patterns`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "reason": 1}]}`, []string{`rules[0].reason must be a string`}},
	} {
		path := write(t, c.text)
		_, err := Load(path)
		if err == nil {
			t.Errorf("%s: loaded", c.text)
			continue
		}
		for _, w := range append(c.want, "policy "+path+": ") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s:\n  error %q\n  lacks %q", c.text, err, w)
			}
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("a missing file: %v", err)
	}
}

func TestString(t *testing.T) {
	path := write(t, `{"rules": [{"effect": "allow"}], "default": "deny"}`)
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "policy " + path + " (1 rules, default deny)"; p.String() != want {
		t.Errorf("%q, want %q", p.String(), want)
	}
}
