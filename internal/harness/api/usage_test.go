package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

func usageOf(t *testing.T, r response) api.UsageReport {
	t.Helper()
	want(t, "usage", r, http.StatusOK, "")
	var u api.UsageReport
	if err := json.Unmarshal(r.body, &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// usageFixture runs one turn for alice (agent helper, 100+10 tokens) and one for bob
// (agent other, 7+3), each a real run through the API.
func usageFixture(t *testing.T, st *store.Store) *fixture {
	t.Helper()
	f := newFixture(t, fixtureOpts{st: st})
	f.turn("alice", f.newSession("alice", "helper"), "hi")
	f.turn("bob", f.newSession("bob", "other"), "hi")
	f.clock.Advance(time.Minute) // the server's clock stands still: the window ends at it
	return f
}

func addUsageAgents(t *testing.T, st *store.Store) {
	t.Helper()
	turn := func(in, out int) map[string]any {
		return map[string]any{"text": "ok", "usage": map[string]any{"input_tokens": in, "output_tokens": out}}
	}
	harnesstest.AddAgent(t, st, "helper", "", harnesstest.AgentSpec{"model": script(turn(100, 10))})
	harnesstest.AddAgent(t, st, "other", "", harnesstest.AgentSpec{"model": script(turn(7, 3))})
}

// checkUsageVisibility: a user sees its own usage, never another's; an admin sees
// everyone's and narrows it by user and agent.
func checkUsageVisibility(t *testing.T, f *fixture) {
	t.Helper()
	u := usageOf(t, f.req("GET", "/api/v1/usage", "alice", nil))
	if len(u.Tokens) != 1 || u.Tokens[0].User != "alice" || u.Tokens[0].Agent != "helper" || u.Tokens[0].InputTokens != 100 ||
		u.Tokens[0].OutputTokens != 10 || u.Tokens[0].Model == "" || u.User != "alice" || u.Totals.InputTokens != 100 {
		t.Errorf("alice's usage: %+v", u)
	}
	u = usageOf(t, f.req("GET", "/api/v1/usage?agent=other", "alice", nil))
	if len(u.Tokens) != 0 {
		t.Errorf("alice's usage of bob's agent shows bob's: %+v", u.Tokens)
	}
	want(t, "alice asks for bob's usage", f.req("GET", "/api/v1/usage?user=bob", "alice", nil), http.StatusForbidden, api.CodeAdminOnly)
	u = usageOf(t, f.req("GET", "/api/v1/usage?user=alice", "alice", nil))
	if len(u.Tokens) != 1 {
		t.Errorf("alice naming herself: %+v", u.Tokens)
	}

	u = usageOf(t, f.req("GET", "/api/v1/usage", "root", nil))
	if len(u.Tokens) != 2 || u.Totals.InputTokens != 107 || u.Totals.OutputTokens != 13 || u.User != "" {
		t.Errorf("the admin's usage: %+v", u)
	}
	u = usageOf(t, f.req("GET", "/api/v1/usage?user=bob", "root", nil))
	if len(u.Tokens) != 1 || u.Tokens[0].User != "bob" || u.Tokens[0].InputTokens != 7 {
		t.Errorf("the admin's view of bob: %+v", u.Tokens)
	}
	u = usageOf(t, f.req("GET", "/api/v1/usage?agent=helper", "root", nil))
	if len(u.Tokens) != 1 || u.Tokens[0].Agent != "helper" {
		t.Errorf("the admin's view of helper: %+v", u.Tokens)
	}
}

func TestUsageOwnAndAdmin(t *testing.T) {
	st := harnesstest.NewStore(t)
	harnesstest.SeedNoSandbox(t, st)
	addUsageAgents(t, st)
	f := usageFixture(t, st)
	checkUsageVisibility(t, f)
	// The window: a window in the past has nothing of today's.
	u := usageOf(t, f.req("GET", "/api/v1/usage?since=2020-01-01&until=2020-02-01", "root", nil))
	if len(u.Tokens) != 0 || len(u.Sandboxes) != 0 || len(u.MCP) != 0 || u.From.Format("2006-01-02") != "2020-01-01" {
		t.Errorf("January 2020: %+v", u)
	}
	if b := string(f.req("GET", "/api/v1/usage?window=1d", "alice", nil).body); !strings.Contains(b, `"sandboxes": []`) && !strings.Contains(b, `"sandboxes":[]`) {
		t.Errorf("empty lists are [] not null: %s", b)
	}
}

// Bad parameters are 400, naming the parameter and what to give instead.
func TestUsageBadParameters(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	for _, c := range []struct{ query, param, fix string }{
		{"since=yesterday", `"since"`, "RFC 3339"},
		{"until=soon", `"until"`, "RFC 3339"},
		{"window=week", `"window"`, "7d"},
		{"window=-3d", `"window"`, "7d"},
		{"window=94d", `"window"`, "at most 93d"},
		{"since=2026-01-01&until=2025-01-01", `"since"`, "ends after it starts"},
		{"since=2026-01-01&window=1d", `"window"`, "not both"},
		{"from=2026-01-01", `"from"`, "since, until, window"},
	} {
		r := f.req("GET", "/api/v1/usage?"+c.query, "alice", nil)
		want(t, c.query, r, http.StatusBadRequest, api.CodeBadRequest)
		if m := r.errMessage(); !strings.Contains(m, c.param) || !strings.Contains(m, c.fix) {
			t.Errorf("%s: message %q does not name %s and %q", c.query, m, c.param, c.fix)
		}
	}
	want(t, "no token", f.req("GET", "/api/v1/usage", "", nil), http.StatusUnauthorized, api.CodeUnauthorized)
	q := url.Values{"since": {"2026-01-01T00:00:00Z"}, "until": {"2026-04-04T00:00:00Z"}}
	want(t, "93 days", f.req("GET", "/api/v1/usage?"+q.Encode(), "alice", nil), http.StatusOK, "")
}

// The same on PostgreSQL, through a harness role.
func TestUsageOnPostgreSQL(t *testing.T) {
	_, harnessURL := harnessRoleDB(t, func(owner *store.Store) { addUsageAgents(t, owner) })
	f := usageFixture(t, storetest.Open(t, harnessURL))
	checkUsageVisibility(t, f)
}

// A real sandbox turn on the local backend: the sandbox's running time shows under its
// environment, for its user only.
func TestUsageSandboxSeconds(t *testing.T) {
	f := newFixture(t, fixtureOpts{sandboxes: true})
	harnesstest.AddAgent(t, f.st, "coder", "default", harnesstest.AgentSpec{"sandbox": harnesstest.Sandbox("default", 30, 60, 120),
		"model": script(execCall("true"), text("Ran it."))})
	f.turn("alice", f.newSession("alice", "coder"), "run it")
	// The sandbox still runs: it counts up to the store's now (the real clock), so let a
	// second pass; the window (the server's clock) ends a minute later.
	time.Sleep(1100 * time.Millisecond)
	f.clock.Advance(time.Minute)
	u := usageOf(t, f.req("GET", "/api/v1/usage", "alice", nil))
	if len(u.Sandboxes) != 1 || u.Sandboxes[0].Environment != "default" || u.Sandboxes[0].Agent != "coder" ||
		u.Sandboxes[0].Seconds < 1 || u.Sandboxes[0].Seconds > 60 || u.Totals.SandboxSeconds != u.Sandboxes[0].Seconds {
		t.Errorf("alice's sandbox time: %+v", u.Sandboxes)
	}
	if u := usageOf(t, f.req("GET", "/api/v1/usage", "bob", nil)); len(u.Sandboxes) != 0 {
		t.Errorf("bob sees alice's sandbox time: %+v", u.Sandboxes)
	}
}
