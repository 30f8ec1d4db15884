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
	    {"effect": "deny", "users": ["bob"], "agents": ["*"], "tools": ["github__delete_*"], "reason": "Bob may not delete on GitHub"},
	    {"effect": "deny", "tools": ["db__query"], "args": {"database": ["prod*"]}},
	    {"effect": "allow", "tools": ["db__*", "github__*"]},
	    {"effect": "allow", "users": ["ops-*"], "agents": ["oncall"]}
	  ],
	  "default": "deny"
	}`)
	for _, c := range []struct {
		name string
		req  Request
		want Decision
	}{
		{"a deny rule with a reason", Request{User: "bob", Agent: "a", Tool: "github__delete_repo"},
			Decision{Allow: false, Rule: 0, Reason: "Bob may not delete on GitHub"}},
		{"another user passes the deny to the allow", Request{User: "ann", Agent: "a", Tool: "github__delete_repo"},
			Decision{Allow: true, Rule: 2, Reason: "rule 2 of the policy (allow)"}},
		{"bob's other tools", Request{User: "bob", Agent: "a", Tool: "github__list_repos"},
			Decision{Allow: true, Rule: 2, Reason: "rule 2 of the policy (allow)"}},
		{"an argument matching", Request{User: "ann", Agent: "a", Tool: "db__query", Args: map[string]any{"database": "prod-eu", "sql": "select 1"}},
			Decision{Allow: false, Rule: 1, Reason: "rule 1 of the policy (deny)"}},
		{"an argument not matching", Request{User: "ann", Agent: "a", Tool: "db__query", Args: map[string]any{"database": "staging"}},
			Decision{Allow: true, Rule: 2, Reason: "rule 2 of the policy (allow)"}},
		{"an argument missing", Request{User: "ann", Agent: "a", Tool: "db__query"},
			Decision{Allow: true, Rule: 2, Reason: "rule 2 of the policy (allow)"}},
		{"users and agents together", Request{User: "ops-kim", Agent: "oncall", Tool: "pager__ack"},
			Decision{Allow: true, Rule: 3, Reason: "rule 3 of the policy (allow)"}},
		{"the default", Request{User: "ops-kim", Agent: "other", Tool: "pager__ack"},
			Decision{Allow: false, Rule: -1, Reason: "no rule of the policy matched; its default is deny"}},
	} {
		if got := p.Decide(c.req); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
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

func TestGlobs(t *testing.T) {
	for _, c := range []struct {
		pat   string
		match []string
		miss  []string
	}{
		{"*", []string{"", "a", "a/b", "a\nb"}, nil},
		{"github__delete_*", []string{"github__delete_repo", "github__delete_"}, []string{"github__delete", "xgithub__delete_repo", "gitlab__delete_x"}},
		{"a?c", []string{"abc", "a/c", "aéc"}, []string{"ac", "abbc"}},
		{"[abc]x", []string{"ax", "cx"}, []string{"dx", "x"}},
		{"[^abc]x", []string{"dx", "éx"}, []string{"ax"}},
		{"[a-c]", []string{"b"}, []string{"d", "-"}},
		{"[a-]", []string{"a", "-"}, []string{"b"}},
		{`[\]]`, []string{"]"}, []string{`\`}},
		{`\*`, []string{"*"}, []string{"x"}},
		{`a\\b`, []string{`a\b`}, []string{"ab"}},
		{"a.b(c)+$", []string{"a.b(c)+$"}, []string{"axb(c)+$", "a.bcc"}},
		{"prod*", []string{"prod", "production"}, []string{"Prod", "preprod"}},
	} {
		re, err := compileGlob(c.pat)
		if err != nil {
			t.Errorf("%q: %v", c.pat, err)
			continue
		}
		for _, s := range c.match {
			if !re.MatchString(s) {
				t.Errorf("%q should match %q", c.pat, s)
			}
		}
		for _, s := range c.miss {
			if re.MatchString(s) {
				t.Errorf("%q should not match %q", c.pat, s)
			}
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
		{`{"default": "allow", "rules": [{"effect": "deny", "user": ["bob"]}]}`, []string{`rules[0]."user" is not a field of a rule; did you mean "users"?`, "fields: effect, users, agents, tools, args, reason"}},
		{`{"default": "allow", "rules": [{"effect": "deny", "Tools": ["x"]}]}`, []string{`did you mean "tools"?`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "priority": 1}]}`, []string{`rules[0]."priority" is not a field of a rule (fields:`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "users": "bob"}]}`, []string{`rules[0].users must be a list of patterns, like ["prod*"], not "bob"`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "users": []}]}`, []string{`rules[0].users is an empty list, which would match nothing`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "tools": ["ok", "[a-"]}]}`, []string{`rules[0].tools[1] "[a-": a "[" class is not closed`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "tools": ["[]"]}]}`, []string{`rules[0].tools[0] "[]": a "[]" class is empty`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "tools": ["[z-a]"]}]}`, []string{`rules[0].tools[0] "[z-a]"`, "invalid character class range"}},
		{`{"default": "allow", "rules": [{"effect": "deny", "agents": ["a\\"]}]}`, []string{`rules[0].agents[0] "a\\": it ends with a lone backslash`}},
		{`{"default": "allow", "rules": [{"effect": "deny", "agents": [""]}]}`, []string{`rules[0].agents[0] "": an empty pattern`, `use "*"`}},
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
