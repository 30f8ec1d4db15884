package policy

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// The guide's budgets: pull requests per user per day, tokens per agent per day,
// sandbox seconds per user per day.
const guideBudgets = `{"default": "allow", "budgets": [
  {"name": "prs_per_day", "servers": ["https://api.githubcopilot.com"], "tools": ["create_pull_request"],
   "per": ["user"], "window": "per_day", "calls": 20},
  {"name": "tokens_per_agent", "owners": ["*"], "per": ["agent"], "window": "per_day", "tokens": 2000000},
  {"name": "sandbox_per_user", "per": ["user"], "window": "per_day", "sandbox_seconds": 7200},
  {"name": "ops_hourly", "owners": ["ops"], "agents": ["oncall"], "per": ["session", "user"], "window": "1h", "calls": 100, "result_bytes": 50000000},
  {"name": "turn", "window": "per_turn", "calls": 30}
]}`

func TestBudgetsLoad(t *testing.T) {
	p := load(t, guideBudgets)
	bs := p.Budgets()
	if len(bs) != 5 {
		t.Fatalf("%d budgets", len(bs))
	}
	for i, want := range []Budget{
		{Name: "prs_per_day", Per: []string{"user"}, Window: Window{Kind: WindowPerDay}, Calls: 20},
		{Name: "tokens_per_agent", Per: []string{"agent"}, Window: Window{Kind: WindowPerDay}, Tokens: 2000000},
		{Name: "sandbox_per_user", Per: []string{"user"}, Window: Window{Kind: WindowPerDay}, SandboxSeconds: 7200},
		// per in the fixed order, whatever the file's
		{Name: "ops_hourly", Per: []string{"user", "session"}, Window: Window{Kind: WindowDuration, Every: time.Hour}, Calls: 100, ResultBytes: 50000000},
		{Name: "turn", Window: Window{Kind: WindowPerTurn}, Calls: 30},
	} {
		b := bs[i]
		if b.Name != want.Name || !slices.Equal(b.Per, want.Per) || b.Window != want.Window ||
			b.Calls != want.Calls || b.ResultBytes != want.ResultBytes || b.Tokens != want.Tokens || b.SandboxSeconds != want.SandboxSeconds {
			t.Errorf("budgets[%d]: %+v, want %+v", i, b, want)
		}
	}
	// Budgets returns a copy: changing it changes nothing in the policy.
	bs[0].Per[0] = "session"
	bs[0].Calls = 1
	if again := p.Budgets(); again[0].Per[0] != "user" || again[0].Calls != 20 {
		t.Errorf("a caller changed the policy: %+v", again[0])
	}
	var none *Policy
	if none.Budgets() != nil || load(t, `{"default": "deny"}`).Budgets() != nil {
		t.Error("budgets without any declared")
	}
	// An empty per is one counter, as when it is left out.
	if b := load(t, `{"default": "deny", "budgets": [{"name": "all", "per": [], "window": "per_day", "calls": 5}]}`).Budgets()[0]; b.Per != nil || b.Key(Subject{User: "u"}) != "" {
		t.Errorf("empty per: %+v", b)
	}
}

func TestBudgetApplies(t *testing.T) {
	bs := load(t, guideBudgets).Budgets()
	prs, tokens, sandbox, ops, turn := bs[0], bs[1], bs[2], bs[3], bs[4]
	const gh = "https://api.githubcopilot.com/mcp/"
	pr := Subject{User: "ann", Owner: "team", Agent: "pr-bot", Session: "s_1", Turn: "3", Server: gh, Tool: "create_pull_request"}
	other := pr
	other.Tool = "list_issues"
	elsewhere := pr
	elsewhere.Server = "https://github.example.com"
	oncall := Subject{User: "kim", Owner: "ops", Agent: "oncall", Server: "https://pager.example.com", Tool: "ack"}
	renamed := oncall
	renamed.Owner = "team" // another owner's agent of the same name
	for _, c := range []struct {
		name      string
		b         Budget
		s         Subject
		call, agt bool
	}{
		{"a pull request", prs, pr, true, false},
		{"another tool", prs, other, false, false},
		{"another server", prs, elsewhere, false, false},
		{"tokens on a call", tokens, pr, false, true}, // no calls limit: a call does not count
		{"sandbox on a call", sandbox, oncall, false, true},
		{"ops: their agent", ops, oncall, true, false}, // no tokens limit: the agent's spending does not count
		{"ops: another owner's agent of the name", ops, renamed, false, false},
		{"every call of a turn", turn, other, true, false},
	} {
		if got := c.b.AppliesToCall(c.s); got != c.call {
			t.Errorf("%s: AppliesToCall %v, want %v", c.name, got, c.call)
		}
		if got := c.b.AppliesToAgent(c.s); got != c.agt {
			t.Errorf("%s: AppliesToAgent %v, want %v", c.name, got, c.agt)
		}
	}
	// A budget on the agent's spending matches by user, owner and agent alone.
	p := load(t, `{"default": "allow", "budgets": [{"name": "kim", "users": ["kim"], "window": "per_day", "tokens": 10, "calls": 1}]}`)
	kim := p.Budgets()[0]
	if !kim.AppliesToAgent(oncall) || !kim.AppliesToCall(oncall) || kim.AppliesToAgent(pr) || kim.AppliesToCall(pr) {
		t.Error("a users condition")
	}
}

func TestBudgetKey(t *testing.T) {
	p := load(t, `{"default": "allow", "budgets": [
	  {"name": "all", "window": "per_day", "calls": 1},
	  {"name": "user", "per": ["user"], "window": "per_day", "calls": 1},
	  {"name": "agent", "per": ["agent"], "window": "1h", "calls": 1},
	  {"name": "owner_agent", "per": ["agent", "owner"], "window": "1h", "calls": 1},
	  {"name": "everything", "per": ["session", "agent", "owner", "user"], "window": "per_day", "calls": 1},
	  {"name": "session_window", "per": ["user"], "window": "per_session", "calls": 1},
	  {"name": "session_twice", "per": ["session"], "window": "per_session", "calls": 1},
	  {"name": "turn_window", "window": "per_turn", "calls": 1}
	]}`)
	bs := p.Budgets()
	s := Subject{User: "alice", Owner: "ops", Agent: "pr-bot", Session: "s_1", Turn: "7", Server: "https://x.example", Tool: "t"}
	for i, want := range []struct{ key, user string }{
		{"", ""},
		{"user=alice", "alice"},
		{"owner=ops,agent=pr-bot", ""},
		{"owner=ops,agent=pr-bot", ""},
		{"user=alice,owner=ops,agent=pr-bot,session=s_1", "alice"},
		{"user=alice,session=s_1", "alice"},
		{"session=s_1", ""},
		{"session=s_1,turn=7", ""},
	} {
		if got := bs[i].Key(s); got != want.key {
			t.Errorf("%s: Key %q, want %q", bs[i].Name, got, want.key)
		}
		if got := bs[i].KeyUser(s); got != want.user {
			t.Errorf("%s: KeyUser %q, want %q", bs[i].Name, got, want.user)
		}
	}
	// Values with the separators, or with what escapes them, never share a key.
	everything := bs[4]
	subjects := []Subject{
		{User: "a,owner=b", Owner: "c"},
		{User: "a", Owner: "b,owner=c"},
		{User: "a", Owner: "b"},
		{User: "a=", Owner: "b"},
		{User: "a%3D", Owner: "b"},
		{User: "a%", Owner: "3D,b"},
		{User: "a", Owner: "b", Agent: ",session=x"},
		{User: "a", Owner: "b", Session: "x"},
		{User: "a", Owner: "b,agent=", Session: "x"},
		{},
		{User: ","},
	}
	seen := map[string]Subject{}
	for _, s := range subjects {
		k := everything.Key(s)
		if prev, ok := seen[k]; ok {
			t.Errorf("%+v and %+v share the key %q", prev, s, k)
		}
		seen[k] = s
	}
	if got := everything.Key(Subject{User: "a,b=c%d"}); got != "user=a%2Cb%3Dc%25d,owner=,agent=,session=" {
		t.Errorf("escaped: %q", got)
	}
}

func TestWindow(t *testing.T) {
	utc := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tokyo := time.FixedZone("JST", 9*3600)
	for _, c := range []struct {
		w          Window
		now        time.Time
		start, end string
	}{
		{Window{Kind: WindowPerDay}, utc("2026-03-05T12:34:56Z"), "2026-03-05T00:00:00Z", "2026-03-06T00:00:00Z"},
		{Window{Kind: WindowPerDay}, utc("2026-03-05T00:00:00Z"), "2026-03-05T00:00:00Z", "2026-03-06T00:00:00Z"},
		{Window{Kind: WindowPerDay}, utc("2026-03-05T23:59:59.999999999Z"), "2026-03-05T00:00:00Z", "2026-03-06T00:00:00Z"},
		{Window{Kind: WindowPerDay}, utc("2024-02-28T23:00:00Z"), "2024-02-28T00:00:00Z", "2024-02-29T00:00:00Z"},
		{Window{Kind: WindowPerDay}, utc("2026-12-31T23:00:00Z"), "2026-12-31T00:00:00Z", "2027-01-01T00:00:00Z"},
		// The UTC day, not the local one: 08:00 in Tokyo on the 6th is the 5th in UTC.
		{Window{Kind: WindowPerDay}, time.Date(2026, 3, 6, 8, 0, 0, 0, tokyo), "2026-03-05T00:00:00Z", "2026-03-06T00:00:00Z"},
		{Window{Kind: WindowDuration, Every: time.Hour}, utc("2026-03-05T12:34:56Z"), "2026-03-05T12:00:00Z", "2026-03-05T13:00:00Z"},
		{Window{Kind: WindowDuration, Every: time.Hour}, utc("2026-03-05T13:00:00Z"), "2026-03-05T13:00:00Z", "2026-03-05T14:00:00Z"},
		{Window{Kind: WindowDuration, Every: 24 * time.Hour}, time.Date(2026, 3, 6, 8, 0, 0, 0, tokyo), "2026-03-05T00:00:00Z", "2026-03-06T00:00:00Z"},
		// From the Unix epoch (a Thursday), not time.Truncate's year 1: 7h windows
		// start at 1970-01-01T00:00Z and every 7h since.
		{Window{Kind: WindowDuration, Every: 7 * time.Hour}, utc("1970-01-01T06:59:59Z"), "1970-01-01T00:00:00Z", "1970-01-01T07:00:00Z"},
		{Window{Kind: WindowDuration, Every: 7 * time.Hour}, utc("1970-01-02T00:00:00Z"), "1970-01-01T21:00:00Z", "1970-01-02T04:00:00Z"},
		{Window{Kind: WindowDuration, Every: 168 * time.Hour}, utc("2026-03-05T12:00:00Z"), "2026-03-05T00:00:00Z", "2026-03-12T00:00:00Z"},
		// Before the epoch, windows still start on multiples of Every.
		{Window{Kind: WindowDuration, Every: time.Hour}, utc("1969-12-31T23:30:00Z"), "1969-12-31T23:00:00Z", "1970-01-01T00:00:00Z"},
	} {
		start, end := c.w.Bounds(c.now)
		if got := start.Format(time.RFC3339) + " " + end.Format(time.RFC3339); got != c.start+" "+c.end {
			t.Errorf("%v at %v: %s, want %s %s", c.w, c.now, got, c.start, c.end)
		}
		if start.Location() != time.UTC || end.Location() != time.UTC {
			t.Errorf("%v at %v: not in UTC", c.w, c.now)
		}
	}
	now := time.Now()
	for _, w := range []Window{{Kind: WindowPerTurn}, {Kind: WindowPerSession}, {Kind: WindowDuration}} {
		if start, end := w.Bounds(now); !start.IsZero() || !end.IsZero() {
			t.Errorf("%+v: %v %v, want zero times", w, start, end)
		}
	}
	for w, want := range map[Window]string{
		{Kind: WindowPerDay}:                            "per_day",
		{Kind: WindowPerTurn}:                           "per_turn",
		{Kind: WindowPerSession}:                        "per_session",
		{Kind: WindowDuration, Every: time.Hour}:        "1h0m0s",
		{Kind: WindowDuration, Every: 90 * time.Second}: "1m30s",
		{Kind: WindowDuration, Every: 168 * time.Hour}:  "168h0m0s",
	} {
		if got := w.String(); got != want {
			t.Errorf("%+v: %q, want %q", w, got, want)
		}
	}
}

func TestSampling(t *testing.T) {
	var none *Policy
	if none.AllowsSampling("https://facts.example.com") {
		t.Error("no policy allowed sampling")
	}
	if load(t, `{"default": "allow"}`).AllowsSampling("https://facts.example.com") ||
		load(t, `{"default": "allow", "sampling": []}`).AllowsSampling("https://facts.example.com") {
		t.Error("sampling allowed by default")
	}
	p := load(t, `{"default": "deny", "sampling": ["https://facts.example.com", "https://*.internal.example", "http://127.0.0.1:8080/sampler/*"]}`)
	for url, want := range map[string]bool{
		"https://facts.example.com/mcp":           true,
		"HTTPS://FACTS.example.com:443":           true,
		"http://facts.example.com/mcp":            false,
		"https://facts.example.com.evil.test/mcp": false,
		"https://db.internal.example/mcp":         true,
		"https://evil.test/.internal.example":     false,
		"http://127.0.0.1:8080/sampler/mcp":       true,
		"http://127.0.0.1:8080/other/mcp":         false,
		"not a url":                               false,
	} {
		if got := p.AllowsSampling(url); got != want {
			t.Errorf("%s: %v, want %v", url, got, want)
		}
	}
	if !load(t, `{"default": "deny", "sampling": ["*"]}`).AllowsSampling("https://any.example") {
		t.Error(`"*"`)
	}
}

// Every mistake in budgets and sampling names the budget and the field and says what
// to write.
func TestBudgetLoadErrors(t *testing.T) {
	const ok = `"window": "per_day", "calls": 1`
	for _, c := range []struct {
		budgets string
		want    []string
	}{
		{`{}`, []string{`"budgets" must be a list of budget objects, like "budgets": [{"name"`}},
		{`["prs"]`, []string{`budgets[0]: a budget must be a JSON object`}},
		{`[{` + ok + `}]`, []string{`budgets[0].name is missing: add a name for the budget, like "name": "prs_per_day"`}},
		{`[{"name": "PRs per day", ` + ok + `}]`, []string{`budgets[0].name is "PRs per day": a budget's name is 1 to 64 of a-z, 0-9, "_" and "-"`}},
		{`[{"name": "", ` + ok + `}]`, []string{`budgets[0].name is "": a budget's name is 1 to 64`}},
		{`[{"name": "` + strings.Repeat("a", 65) + `", ` + ok + `}]`, []string{`budgets[0].name is "aaaa`, `1 to 64`}},
		{`[{"name": 1, ` + ok + `}]`, []string{`budgets[0].name is 1: a budget's name`}},
		{`[{"name": "a", ` + ok + `}, {"name": "b", ` + ok + `}, {"name": "a", ` + ok + `}]`, []string{`budgets[2].name "a" is also budgets[0]'s: give each budget a name of its own`}},
		{`[{"name": "a", "window": "per_day"}]`, []string{`budgets[0] has no limit: add at least one of "calls", "result_bytes", "tokens" or "sandbox_seconds"`}},
		{`[{"name": "a", "calls": 1}]`, []string{`budgets[0].window is missing: add "window": "per_day" (the UTC calendar day), "per_session", "per_turn" or a duration like "1h"`}},
		{`[{"name": "a", "window": "daily", "calls": 1}]`, []string{`budgets[0].window is "daily": write "per_day"`}},
		{`[{"name": "a", "window": "per_days", "calls": 1}]`, []string{`budgets[0].window is "per_days"`, `did you mean "per_day"?`}},
		{`[{"name": "a", "window": 3600, "calls": 1}]`, []string{`budgets[0].window must be a string: "per_day", "per_session", "per_turn" or a duration like "1h", not 3600`}},
		{`[{"name": "a", "window": "500ms", "calls": 1}]`, []string{`budgets[0].window is "500ms": a duration window is a whole number of seconds from 1s to 8784h (366 days)`}},
		{`[{"name": "a", "window": "1.5s", "calls": 1}]`, []string{`budgets[0].window is "1.5s": a duration window is a whole number of seconds`}},
		{`[{"name": "a", "window": "8785h", "calls": 1}]`, []string{`budgets[0].window is "8785h"`}},
		{`[{"name": "a", "window": "-1h", "calls": 1}]`, []string{`budgets[0].window is "-1h"`}},
		{`[{"name": "a", "window": "per_day", "calls": 0}]`, []string{`budgets[0].calls is 0: a limit is a positive whole number, like "calls": 100 (leave it out for no limit)`}},
		{`[{"name": "a", "window": "per_day", "calls": -1}]`, []string{`budgets[0].calls is -1: a limit is a positive whole number`}},
		{`[{"name": "a", "window": "per_day", "tokens": 1.5}]`, []string{`budgets[0].tokens is 1.5: a limit is a positive whole number, like "tokens": 100`}},
		{`[{"name": "a", "window": "per_day", "result_bytes": "10MB"}]`, []string{`budgets[0].result_bytes is "10MB": a limit is a positive whole number`}},
		{`[{"name": "a", "window": "per_day", "sandbox_seconds": 1e3}]`, []string{`budgets[0].sandbox_seconds is 1e3: a limit is a positive whole number`}},
		{`[{"name": "a", "window": "per_day", "calls": 99999999999999999999}]`, []string{`budgets[0].calls is 99999999999999999999: a limit is a positive whole number`}},
		{`[{"name": "a", "per": "user", ` + ok + `}]`, []string{`budgets[0].per must be a list of "user", "owner", "agent" or "session", like "per": ["user"], not "user"`}},
		{`[{"name": "a", "per": ["users"], ` + ok + `}]`, []string{`budgets[0].per[0] is "users": a counter is kept per "user", "owner", "agent" (the agent's owner and name) or "session"; did you mean "user"?`}},
		{`[{"name": "a", "per": ["user", "tool"], ` + ok + `}]`, []string{`budgets[0].per[1] is "tool": a counter is kept per`}},
		{`[{"name": "a", "agents": ["pr-bot"], ` + ok + `}]`, []string{`budgets[0].agents: an agent's name is chosen by whoever publishes the agent`, `Add "owners"`}},
		{`[{"name": "a", "tools": ["github__create_pull_request"], ` + ok + `}]`, []string{`budgets[0].tools[0] "github__create_pull_request": tools match the server's own tool name`}},
		{`[{"name": "a", "servers": ["github"], ` + ok + `}]`, []string{`budgets[0].servers[0] "github": servers match the MCP server's URL`}},
		{`[{"name": "a", "users": [], ` + ok + `}]`, []string{`budgets[0].users is an empty list, which would match nothing`}},
		{`[{"name": "a", "args": {"database": ["prod"]}, ` + ok + `}]`, []string{`budgets[0].args: a budget counts calls whatever their arguments, so it has no "args"`}},
		{`[{"name": "a", "limit": 5, ` + ok + `}]`, []string{`budgets[0]."limit" is not a field of a budget (fields: name, users, owners, agents, servers, tools, per, window, calls, result_bytes, tokens, sandbox_seconds)`}},
		{`[{"name": "a", "call": 5, "window": "per_day"}]`, []string{`budgets[0]."call" is not a field of a budget; did you mean "calls"?`}},
		{`[{"name": "a", "tools": ["x"], "window": "per_day", "tokens": 5}]`, []string{`budgets[0].tools: a budget with "tokens" or "sandbox_seconds" cannot have "tools": the model's tokens and the sandbox's time are spent by the agent's whole turn, not by one tool's calls`, `Split it in two`}},
		{`[{"name": "a", "servers": ["https://x.example"], "window": "per_day", "calls": 1, "sandbox_seconds": 5}]`, []string{`budgets[0].servers: a budget with "tokens" or "sandbox_seconds" cannot have "servers"`}},
	} {
		text := `{"default": "allow", "budgets": ` + c.budgets + `}`
		path := write(t, text)
		_, err := Load(path)
		if err == nil {
			t.Errorf("%s: loaded", c.budgets)
			continue
		}
		for _, w := range append(c.want, "policy "+path+": ") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s:\n  error %q\n  lacks %q", c.budgets, err, w)
			}
		}
	}
	for _, c := range []struct{ text, want string }{
		{`{"default": "allow", "sampling": "https://facts.example.com"}`, `"sampling" must be a list of server URL patterns whose sampling requests may run on the agent's model, like "sampling": ["https://facts.example.com"]`},
		{`{"default": "allow", "sampling": ["facts"]}`, `sampling[0] "facts": servers match the MCP server's URL, not the name an agent gives it`},
		{`{"default": "allow", "sampling": ["https://[a-"]}`, `sampling[0] "https://[a-": a "[" class is not closed`},
		{`{"default": "allow", "budget": []}`, `"budget" is not a field of a policy file; did you mean "budgets"? (fields: rules, default, budgets, sampling, downloads)`},
		{`{"default": "allow", "Sampling": []}`, `did you mean "sampling"?`},
	} {
		if _, err := Load(write(t, c.text)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.text, err, c.want)
		}
	}
	// The window's bounds are accepted.
	for _, w := range []string{"1s", "8784h", "24h", "168h"} {
		load(t, `{"default": "allow", "budgets": [{"name": "a", "window": "`+w+`", "calls": 1}]}`)
	}
}

// Every policy file the guide shows loads.
func TestGuideExamplesLoad(t *testing.T) {
	data, err := os.ReadFile("../../../templates/guides/mcp-policy.md.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(data), "```json\n")[1:]
	if len(blocks) < 5 {
		t.Fatalf("%d JSON blocks in the guide", len(blocks))
	}
	for _, b := range blocks {
		text, _, _ := strings.Cut(b, "```")
		if _, err := Load(write(t, text)); err != nil {
			t.Errorf("%s\n%v", text, err)
		}
	}
}
