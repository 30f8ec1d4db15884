package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/approvals"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/budgets"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// aprPolicy is policy text loaded as the harness loads its file.
func aprPolicy(t testing.TB, text string) *policy.Policy {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// pendingFor waits until user's GET /api/v1/approvals?session=sid lists one approval,
// and returns it.
func (f *fixture) pendingFor(user, sid string) map[string]any {
	f.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := f.req("GET", "/api/v1/approvals?session="+sid, user, nil)
		want(f.t, "list approvals", r, http.StatusOK, "")
		if list, _ := r.json(f.t)["approvals"].([]any); len(list) == 1 {
			return list[0].(map[string]any)
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("no pending approval for %s in session %s after 15s: %s", user, sid, r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// decision posts user's decision on approval id, for a goroutine: the status and the
// error code ("" for none).
func (f *fixture) decision(user, id, decision, note string) (int, string, error) {
	body, _ := json.Marshal(api.DecisionRequest{Decision: decision, Note: note})
	r, err := http.NewRequest("POST", f.ts.URL+"/api/v1/approvals/"+id, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+f.tokens[user])
	resp, err := f.ts.Client().Do(r)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error.Code, nil
}

// held is a call waiting at an approval gate on st, as a harness replica's toolset
// waits: its verdict comes on the channel.
func held(st *store.Store, sid, user string, timeout time.Duration) <-chan mcptools.Verdict {
	out := make(chan mcptools.Verdict, 1)
	gate := &approvals.Gate{Store: st, Poll: 20 * time.Millisecond}
	go func() {
		v, err := gate.Await(context.Background(), mcptools.ApprovalRequest{
			Asking: mcptools.Asking{Origin: mcptools.Origin{SessionID: sid, RunID: "r-held", ToolCallID: "c-held"},
				User: user, Agent: "talker", Owner: harnesstest.Owner, Server: "https://mcp.example.test/"}, Tool: "create_pull_request",
			Name: "gh__create_pull_request", Args: map[string]any{"title": "Fix"}, Rule: 0, Reason: "pull requests need a person",
			Approvers: []string{policy.Caller, "lead_*"}, Timeout: timeout,
		})
		if err != nil {
			v.State = "error: " + err.Error()
		}
		out <- v
	}()
	return out
}

// Two approvers deciding one call at once through the API: exactly one is answered 200,
// the other 409 already_decided, and the waiting call gets the winner's decision. A
// user the rule does not name is told the approval does not exist (404 on GET and
// POST) and lists nothing; the caller ($caller) lists it.
func TestApprovalDecidedByTwoApproversAtOnce(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.addUser("lead_ana", false)
	f.addUser("lead_ben", false)
	harnesstest.AddAgent(t, f.st, "talker", "", harnesstest.AgentSpec{"model": script(text("hi"))})
	sid := f.newSession("alice", "talker")
	for round := range 5 {
		verdict := held(f.st, sid, "alice", time.Minute)
		a := f.pendingFor("alice", sid)
		id := a["id"].(string)
		if a["tool"] != "create_pull_request" || a["user"] != "alice" || !strings.Contains(a["arguments"].(string), "Fix") || a["state"] != store.ApprovalPending {
			t.Fatalf("the caller's pending approval %v", a)
		}
		r := f.req("GET", "/api/v1/approvals", "bob", nil)
		want(t, "bob lists approvals", r, http.StatusOK, "")
		if list, _ := r.json(t)["approvals"].([]any); len(list) != 0 {
			t.Fatalf("bob, whom the rule does not name, lists %v", list)
		}
		want(t, "bob reads the approval", f.req("GET", "/api/v1/approvals/"+id, "bob", nil), http.StatusNotFound, api.CodeNotFound)
		want(t, "bob approves", f.req("POST", "/api/v1/approvals/"+id, "bob", map[string]any{"decision": "approve"}), http.StatusNotFound, api.CodeNotFound)
		want(t, "lead_ana reads the approval", f.req("GET", "/api/v1/approvals/"+id, "lead_ana", nil), http.StatusOK, "")

		var statuses [2]int
		var codes [2]string
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, d := range []struct{ user, decision string }{{"lead_ana", "approve"}, {"lead_ben", "deny"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				status, code, err := f.decision(d.user, id, d.decision, "by "+d.user)
				if err != nil {
					t.Error(err)
				}
				statuses[i], codes[i] = status, code
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i := range statuses {
			switch {
			case statuses[i] == http.StatusOK && winner == -1:
				winner = i
			case statuses[i] == http.StatusConflict && codes[i] == api.CodeDecided:
			default:
				t.Fatalf("round %d: answers %v %v; want one 200 and one 409 %s", round, statuses, codes, api.CodeDecided)
			}
		}
		if winner == -1 {
			t.Fatalf("round %d: answers %v %v; nobody won", round, statuses, codes)
		}
		wantBy, wantApproved := []string{"lead_ana", "lead_ben"}[winner], winner == 0
		var v mcptools.Verdict
		select {
		case v = <-verdict:
		case <-time.After(10 * time.Second):
			t.Fatal("the waiting call did not learn the decision")
		}
		if v.By != wantBy || v.Approved != wantApproved || v.Note != "by "+wantBy {
			t.Fatalf("round %d: the waiting call got %+v; want %s's decision", round, v, wantBy)
		}
		got := f.req("GET", "/api/v1/approvals/"+id, "lead_ben", nil)
		want(t, "read the decided approval", got, http.StatusOK, "")
		if j := got.json(t); j["decided_by"] != wantBy || j["decided_at"] == nil {
			t.Fatalf("the decided approval %v; want %s's decision", j, wantBy)
		}
	}
	decided := harnesstest.Payloads(t, f.st, sid, events.KindApprovalDecided)
	if len(decided) != 5 {
		t.Fatalf("%d approval_decided events for 5 approvals: %v", len(decided), decided)
	}
	r := f.req("GET", "/api/v1/approvals", "alice", nil)
	if list, _ := r.json(t)["approvals"].([]any); len(list) != 0 {
		t.Fatalf("decided approvals are still listed as pending: %v", list)
	}
	want(t, "an unknown decision", f.req("POST", "/api/v1/approvals/apr_nope", "alice", map[string]any{"decision": "maybe"}), http.StatusUnprocessableEntity, "")
	want(t, "an unknown approval", f.req("POST", "/api/v1/approvals/apr_nope", "alice", map[string]any{"decision": "approve"}), http.StatusNotFound, api.CodeNotFound)
}

// A call waits on one harness replica (its own store handle, as a harness role on
// PostgreSQL) and a person approves it through another replica's API on the same
// database: the call is then sent, once.
func TestApprovalServedByAnotherReplicaOnPostgreSQL(t *testing.T) {
	ctx := context.Background()
	t.Setenv("TF_TEST_APR_TOKEN", "apr-tok")
	var calls atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "kb", Version: "1"}, nil)
	type in struct {
		Q string `json:"q" jsonschema:"what to look up"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Description: "Look something up."}, func(ctx context.Context, req *mcp.CallToolRequest, x in) (*mcp.CallToolResult, any, error) {
		calls.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answer for " + x.Q}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	kb := newLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer apr-tok" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	_, harnessURL := harnessRoleDB(t, func(owner *store.Store) {
		harnesstest.AddAgent(t, owner, "asker", "", harnesstest.AgentSpec{
			"model":       script(text("hi")),
			"mcp_servers": []any{map[string]any{"name": "kb", "url": kb, "credential_env": "TF_TEST_APR_TOKEN"}},
		})
	})
	replicaA := storetest.Open(t, harnessURL)
	replicaB := storetest.Open(t, harnessURL)
	g := newFixture(t, fixtureOpts{st: replicaB})
	g.addUser("lead_ana", false)
	sid := g.newSession("alice", "asker")

	pol := aprPolicy(t, `{"rules": [{"effect": "approve", "servers": ["`+kb+`"], "approvers": ["lead_*"], "timeout": "1m"}], "default": "deny"}`)
	a, err := agents.Load(ctx, replicaA, "asker")
	if err != nil {
		t.Fatal(err)
	}
	ts := mcptools.New(a.Spec.MCPServers, mcptools.Options{User: "alice", Agent: a.Name, Owner: a.Owner, Policy: pol,
		Credentials: a.Authority(nil, harnesstest.Owner), Approver: &approvals.Gate{Store: replicaA, Poll: 20 * time.Millisecond}})
	defer ts.Close()
	_ = ts.Specs(ctx)
	type answer struct {
		v   mcptools.Value
		err error
	}
	done := make(chan answer, 1)
	go func() {
		v, err := ts.CallValue(ctx, mcptools.Origin{SessionID: sid, RunID: "r-a", ToolCallID: "c-a"}, "kb__lookup", map[string]any{"q": "pg"})
		done <- answer{v, err}
	}()
	id := g.pendingFor("lead_ana", sid)["id"].(string)
	if n := calls.Load(); n != 0 {
		t.Fatalf("the server received %d calls before the approval", n)
	}
	// The caller is not among this rule's approvers.
	want(t, "alice reads it", g.req("GET", "/api/v1/approvals/"+id, "alice", nil), http.StatusNotFound, api.CodeNotFound)
	want(t, "lead_ana approves on replica B", g.req("POST", "/api/v1/approvals/"+id, "lead_ana", map[string]any{"decision": "approve", "note": "ok"}), http.StatusOK, "")
	var res answer
	select {
	case res = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("replica A's call did not learn replica B's decision")
	}
	if res.err != nil || res.v.Text != "answer for pg" || res.v.Approval == nil || res.v.Approval.By != "lead_ana" {
		t.Fatalf("the call on replica A: %+v, %v", res.v, res.err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the server received %d calls; want 1", n)
	}
	want(t, "a second decision", g.req("POST", "/api/v1/approvals/"+id, "lead_ana", map[string]any{"decision": "deny"}), http.StatusConflict, api.CodeDecided)
	if d := harnesstest.Payloads(t, replicaB, sid, events.KindApprovalDecided); len(d) != 1 || d[0]["by"] != "lead_ana" {
		t.Fatalf("approval_decided %v", d)
	}
}

// GET /api/v1/budgets shows a user the counters charged to them, with the limits the
// policy declares; an admin sees every counter (and may narrow to one user).
func TestBudgetsListing(t *testing.T) {
	ctx := context.Background()
	pol := aprPolicy(t, `{"rules": [], "default": "allow", "budgets": [
	  {"name": "calls_per_user", "per": ["user"], "window": "per_day", "calls": 5},
	  {"name": "calls_per_agent", "per": ["agent"], "window": "1h", "calls": 100}
	]}`)
	f := newFixture(t, fixtureOpts{cfg: func(c *api.Config) { c.Budgets = pol.Budgets }})
	m := &budgets.Meter{Store: f.st, Policy: pol}
	for user, n := range map[string]int{"alice": 2, "bob": 1} {
		for range n {
			if err := m.Admit(ctx, policy.Subject{User: user, Owner: "ops", Agent: "pr-bot", Session: "s-" + user, Server: "https://x.test/", Tool: "t"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rows := func(user, query string) []map[string]any {
		t.Helper()
		r := f.req("GET", "/api/v1/budgets"+query, user, nil)
		want(t, user+" lists budgets", r, http.StatusOK, "")
		var out struct {
			Budgets []map[string]any `json:"budgets"`
		}
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatal(err)
		}
		return out.Budgets
	}
	alice := rows("alice", "")
	if len(alice) != 1 || alice[0]["budget"] != "calls_per_user" || alice[0]["user"] != "alice" || alice[0]["calls"] != 2.0 ||
		alice[0]["window"] != "per_day" || alice[0]["refills_at"] == nil {
		t.Fatalf("alice's budgets %v; want her calls_per_user counter only", alice)
	}
	if l, _ := alice[0]["limits"].(map[string]any); l["calls"] != 5.0 {
		t.Fatalf("alice's limits %v", alice[0]["limits"])
	}
	if bob := rows("bob", "?user=alice"); len(bob) != 1 || bob[0]["user"] != "bob" || bob[0]["calls"] != 1.0 {
		t.Fatalf("bob's budgets (asking for alice's) %v; want his own only", bob)
	}
	all := rows("root", "")
	if len(all) != 3 {
		t.Fatalf("the admin's budgets %v; want alice's, bob's and the agent's", all)
	}
	for _, r := range all {
		if r["budget"] == "calls_per_agent" && (r["calls"] != 3.0 || r["window"] != "1h0m0s" || !strings.Contains(r["key"].(string), "agent=pr-bot")) {
			t.Fatalf("the agent's counter %v; want 3 calls", r)
		}
	}
	if one := rows("root", "?user=bob"); len(one) != 1 || one[0]["user"] != "bob" {
		t.Fatalf("the admin's budgets of bob %v", one)
	}
}

// newLoopback serves h on loopback until the test ends and returns its URL.
func newLoopback(t testing.TB, h http.Handler) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}
