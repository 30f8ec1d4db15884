package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// listener is a loopback HTTP server (an MCP server, or whatever an agent's author
// points a URL at) that records the Authorization header of every request it receives
// and the tool calls it answers: where a leaked credential would land.
type listener struct {
	URL   string
	mu    sync.Mutex
	auths []string
	calls []string
}

type cityArg struct {
	City string `json:"city" jsonschema:"the city"`
}

// newListener serves a real MCP server (go-sdk) with one tool, capital.
func newListener(t *testing.T) *listener {
	t.Helper()
	l := &listener{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "facts", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "capital", Description: "The capital of a country."}, func(ctx context.Context, req *mcp.CallToolRequest, in cityArg) (*mcp.CallToolResult, any, error) {
		l.mu.Lock()
		l.calls = append(l.calls, "capital "+in.City)
		l.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Paris"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.auths = append(l.auths, r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"))
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	l.URL = ts.URL
	return l
}

// received is every credential the listener was sent (requests without one left out),
// and how many requests it had.
func (l *listener) received() ([]string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var got []string
	for _, a := range l.auths {
		if a != "" {
			got = append(got, a)
		}
	}
	return got, len(l.auths)
}

func (l *listener) toolCalls() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

// addOwnedAgent stores agent name owned by owner, as that owner's terraform apply does.
func addOwnedAgent(t *testing.T, st *store.Store, name, owner string, spec map[string]any) {
	t.Helper()
	spec["name"] = name
	raw, _ := json.Marshal(spec)
	s := agentspec.Default(name)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("agent %q: %v", name, err)
	}
	if err := st.CreateAgent(context.Background(), store.Agent{ID: "agent-" + name, Name: name, Owner: owner, Spec: s.Encode()}); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// mcpAgent is an agent that lists its MCP tools (connecting to the server) and answers.
func mcpAgent(url string, server map[string]any) map[string]any {
	server["url"] = url
	if server["name"] == nil {
		server["name"] = "fx"
	}
	return map[string]any{"model": harnesstest.Script(map[string]any{"text": "done"}), "mcp_servers": []any{server}}
}

// The attack of issue 23, through `trueforge-harness run` with a credentials file on
// SQLite: team A's agent names team B's MCP credential, or the operator's model key,
// with a URL of its own; team B's own agent points B's credential at another origin.
// Each run fails before anything is dialled, naming the credential, the field and the
// fix, and the attacker's server receives no credential (no request at all). Team B's
// agent on B's bound origin is sent B's token.
func TestRunSendsACredentialOnlyWhereTheOperatorBoundIt(t *testing.T) {
	const bToken, modelKey = "b-mcp-CANARY-7731", "sk-operator-CANARY-0c2e"
	t.Setenv("TF_TEST_B_MCP_TOKEN", bToken)
	t.Setenv("TF_TEST_OPERATOR_MODEL_KEY", modelKey)
	bServer, attacker := newListener(t), newListener(t)
	creds := writeFile(t, "credentials.json", `{"credentials": [
	  {"name": "b-facts", "env": "TF_TEST_B_MCP_TOKEN", "origins": ["`+bServer.URL+`"], "owners": ["team_b"]},
	  {"name": "openai", "env": "TF_TEST_OPERATOR_MODEL_KEY", "origins": ["https://api.openai.com"], "owners": ["*"]}
	]}`)
	st := seed(t)
	addOwnedAgent(t, st, "a-steals-b", "team_a", mcpAgent(attacker.URL+"/mcp", map[string]any{"credential": "b-facts"}))
	addOwnedAgent(t, st, "a-steals-b-env", "team_a", mcpAgent(attacker.URL+"/mcp", map[string]any{"credential_env": "TF_TEST_B_MCP_TOKEN"}))
	addOwnedAgent(t, st, "a-on-b-origin", "team_a", mcpAgent(bServer.URL+"/mcp", map[string]any{"credential": "b-facts"}))
	addOwnedAgent(t, st, "b-elsewhere", "team_b", mcpAgent(attacker.URL+"/mcp", map[string]any{"credential": "b-facts"}))
	addOwnedAgent(t, st, "a-model-key", "team_a", map[string]any{"model": map[string]any{
		"provider": "openai", "name": "gpt-test", "base_url": attacker.URL + "/v1", "api_key_credential": "openai"}})
	addOwnedAgent(t, st, "a-model-env", "team_a", map[string]any{"model": map[string]any{
		"provider": "openai", "name": "gpt-test", "base_url": attacker.URL + "/v1", "api_key_env": "TF_TEST_OPERATOR_MODEL_KEY"}})
	addOwnedAgent(t, st, "b-facts", "team_b", mcpAgent(bServer.URL+"/mcp", map[string]any{"credential": "b-facts"}))

	for _, c := range []struct {
		agent string
		want  []string
	}{
		{"a-steals-b", []string{`mcp_servers[0].credential = "b-facts"`, `may be used only by agents of team_b`, `owned by "team_a"`, "nothing was sent", creds}},
		{"a-steals-b-env", []string{`mcp_servers[0].credential_env = "TF_TEST_B_MCP_TOKEN"`, `declares no credential holding TF_TEST_B_MCP_TOKEN that agents of "team_a" may send`, "mcp_servers[0].credential"}},
		{"a-on-b-origin", []string{`may be used only by agents of team_b`}},
		{"b-elsewhere", []string{`mcp_servers[0].credential = "b-facts"`, `is bound to ` + strings.Replace(bServer.URL, "http://", "http://", 1), "mcp_servers[0].url", "Point mcp_servers[0].url at one of those origins"}},
		{"a-model-key", []string{`model.api_key_credential = "openai"`, "is bound to https://api.openai.com:443", "model.base_url"}},
		{"a-model-env", []string{`model.api_key_env = "TF_TEST_OPERATOR_MODEL_KEY"`, "declares no credential holding TF_TEST_OPERATOR_MODEL_KEY", "model.api_key_credential"}},
	} {
		out, _, err := run(t, st.Path(), "", "--credentials", creds, "run", c.agent, "hi")
		if err == nil {
			t.Errorf("%s ran:\n%s", c.agent, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the error %q does not say %q", c.agent, err, w)
			}
		}
		if strings.Contains(out, "done") {
			t.Errorf("%s: the agent answered:\n%s", c.agent, out)
		}
	}
	if got, n := attacker.received(); len(got) != 0 || n != 0 {
		t.Fatalf("the attacker's server received %d requests, with credentials %q; want none", n, got)
	}
	if got, n := bServer.received(); len(got) != 0 || n != 0 {
		t.Fatalf("before team B's own run, B's server received %d requests (%q); want none", n, got)
	}

	out, _, err := run(t, st.Path(), "", "--credentials", creds, "run", "b-facts", "hi")
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("team B's agent on B's origin: %v\n%s", err, out)
	}
	got, _ := bServer.received()
	if len(got) == 0 || got[0] != "Bearer "+bToken {
		t.Fatalf("B's server received credentials %q; want B's token", got)
	}
	for _, a := range got {
		if a != "Bearer "+bToken {
			t.Fatalf("B's server received %q besides B's token", a)
		}
	}
}

// Without a credentials file on SQLite (one operator), the operator's own agents keep
// naming the harness's variables; an agent another owner published is sent nothing.
func TestRunWithoutCredentialsFileServesOnlyTheOperator(t *testing.T) {
	const token = "op-mcp-CANARY-51aa"
	t.Setenv("TF_TEST_OPERATOR_MCP_TOKEN", token)
	srv := newListener(t)
	st := seed(t)
	addOwnedAgent(t, st, "mallorys", "mallory", mcpAgent(srv.URL+"/mcp", map[string]any{"credential_env": "TF_TEST_OPERATOR_MCP_TOKEN"}))
	addOwnedAgent(t, st, "mine", harnesstest.Owner, mcpAgent(srv.URL+"/mcp", map[string]any{"credential": "TF_TEST_OPERATOR_MCP_TOKEN"}))

	_, _, err := run(t, st.Path(), "", "run", "mallorys", "hi")
	if err == nil || !strings.Contains(err.Error(), `agent "mallorys" is owned by "mallory", not by this harness's operator "tester"`) ||
		!strings.Contains(err.Error(), "--credentials") {
		t.Fatalf("another owner's agent without a credentials file: %v", err)
	}
	if got, n := srv.received(); n != 0 {
		t.Fatalf("the server received %d requests (%q) for mallory's agent; want none", n, got)
	}
	out, _, err := run(t, st.Path(), "", "run", "mine", "hi")
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("the operator's own agent: %v\n%s", err, out)
	}
	if got, _ := srv.received(); len(got) == 0 || got[0] != "Bearer "+token {
		t.Fatalf("the operator's server received %q; want the operator's token", got)
	}
}

// A broken credentials file stops a run before the agent starts, naming the flag, the
// file, the credential and the field.
func TestRunRefusesABrokenCredentialsFile(t *testing.T) {
	st := seed(t)
	bad := writeFile(t, "credentials.json", `{"credentials": [{"name": "x", "env": "X", "origins": ["http://facts.example.com"], "owners": ["*"]}]}`)
	out, _, err := run(t, st.Path(), "", "--credentials", bad, "run", "talker", "hi")
	if err == nil || strings.Contains(out, "Hello there") {
		t.Fatalf("a broken credentials file let the run go on: %v\n%s", err, out)
	}
	for _, want := range []string{"--credentials", bad, `credentials[0] ("x").origins[0]`, "plain http://"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not name %q", err, want)
		}
	}
}

// runAsRole runs the CLI in-process as the database role of dbURL (no --owner: on
// PostgreSQL the caller is the role).
func runAsRole(t *testing.T, dbURL string, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(""))
	cmd.SetArgs(append([]string{"--database-url", dbURL}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// On a PostgreSQL control plane the owner is the role that applied: team A's role
// publishes an agent naming team B's credential with A's own URL, and the harness role
// runs it. With a credentials file binding B's credential to team B's role and B's
// origin, A's run is refused and the attacker's server gets nothing, while B's agent
// on B's origin is sent B's token; without a file, nothing is sent to anyone.
func TestRunOnPostgreSQLBindsCredentialsToRoles(t *testing.T) {
	pg := storetest.NewHarnessDB(t)
	c, owner, harnessRole, db := pg.Cluster, pg.Owner, pg.Harness, pg.Name
	teamA, teamB := c.Role(t, "team_a"), c.Role(t, "team_b")
	ctx := context.Background()
	must(t, owner.ApplyRoles(ctx, store.TeamRole, teamA))
	must(t, owner.ApplyRoles(ctx, store.TeamRole, teamB))

	const bToken = "b-mcp-CANARY-pg-41e0"
	t.Setenv("TF_TEST_B_MCP_TOKEN", bToken)
	bServer, attacker := newListener(t), newListener(t)
	for role, agents := range map[string]map[string]map[string]any{
		teamA: {"a-steals-b": mcpAgent(attacker.URL+"/mcp", map[string]any{"credential": "b-facts"}),
			"a-steals-b-env": mcpAgent(attacker.URL+"/mcp", map[string]any{"credential_env": "TF_TEST_B_MCP_TOKEN"})},
		teamB: {"b-facts": mcpAgent(bServer.URL+"/mcp", map[string]any{"credential": "b-facts"})},
	} {
		st, err := store.Open(ctx, c.URL(db, role))
		if err != nil {
			t.Fatal(err)
		}
		for name, spec := range agents {
			addOwnedAgent(t, st, name, role, spec)
		}
		st.Close()
	}
	creds := writeFile(t, "credentials.json", `{"credentials": [
	  {"name": "b-facts", "env": "TF_TEST_B_MCP_TOKEN", "origins": ["`+bServer.URL+`"], "owners": ["`+teamB+`"]}
	]}`)
	asHarness := c.URL(db, harnessRole)
	for _, agent := range []string{"a-steals-b", "a-steals-b-env"} {
		out, err := runAsRole(t, asHarness, "--credentials", creds, "run", agent, "hi")
		if err == nil || !strings.Contains(err.Error(), `owned by "`+teamA+`"`) && !strings.Contains(err.Error(), `agents of "`+teamA+`"`) {
			t.Errorf("%s with the credentials file: %v\n%s", agent, err, out)
		}
	}
	// No credentials file on PostgreSQL: nothing is sent, whoever's agent it is.
	for _, agent := range []string{"a-steals-b-env", "b-facts"} {
		if _, err := runAsRole(t, asHarness, "run", agent, "hi"); err == nil || !strings.Contains(err.Error(), "on a shared (PostgreSQL) control plane it sends no credential without one") {
			t.Errorf("%s without a credentials file: %v", agent, err)
		}
	}
	if got, n := attacker.received(); n != 0 {
		t.Fatalf("the attacker's server received %d requests, credentials %q; want none", n, got)
	}
	if got, n := bServer.received(); n != 0 {
		t.Fatalf("B's server received %d requests (%q) before B's run with the file; want none", n, got)
	}
	out, err := runAsRole(t, asHarness, "--credentials", creds, "run", "b-facts", "hi")
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("team B's agent: %v\n%s", err, out)
	}
	if got, _ := bServer.received(); len(got) == 0 || got[0] != "Bearer "+bToken {
		t.Fatalf("B's server received %q; want B's token", got)
	}
}

// Through serve's HTTP API, an API user's message to team A's agent naming team B's
// credential with A's own URL is refused (422, naming the credential and the field)
// and the attacker's server receives nothing; team B's agent gets B's token.
func TestServeSendsACredentialOnlyWhereTheOperatorBoundIt(t *testing.T) {
	const bToken = "b-mcp-CANARY-serve-9d3e"
	t.Setenv("TF_TEST_B_MCP_TOKEN", bToken)
	bServer, attacker := newListener(t), newListener(t)
	creds := writeFile(t, "credentials.json", `{"credentials": [
	  {"name": "b-facts", "env": "TF_TEST_B_MCP_TOKEN", "origins": ["`+bServer.URL+`"], "owners": ["team_b"]}
	]}`)
	st := harnesstest.NewStore(t)
	seedServe(t, st)
	addOwnedAgent(t, st, "a-steals-b", "team_a", mcpAgent(attacker.URL+"/mcp", map[string]any{"credential": "b-facts"}))
	addOwnedAgent(t, st, "b-facts", "team_b", mcpAgent(bServer.URL+"/mcp", map[string]any{"credential": "b-facts"}))
	tokenOut, _, err := run(t, st.Path(), "", "users", "add", "alice")
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(tokenOut)
	base, _ := startServe(t, st.Path(), "--listen", "127.0.0.1:0", "--interval", "1h", "--credentials", creds)
	call := func(path string, body any) (int, string) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", base+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		_, _ = out.ReadFrom(resp.Body)
		return resp.StatusCode, out.String()
	}
	message := func(agent string) (int, string) {
		code, body := call("/api/v1/sessions", map[string]any{"agent": agent})
		if code != 201 {
			t.Fatalf("creating a session of %s: %d %s", agent, code, body)
		}
		var s struct{ ID string }
		_ = json.Unmarshal([]byte(body), &s)
		return call("/api/v1/sessions/"+s.ID+"/messages", map[string]any{"text": "hi"})
	}
	code, body := message("a-steals-b")
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, `mcp_servers[0].credential = \"b-facts\"`) || !strings.Contains(body, "may be used only by agents of team_b") {
		t.Fatalf("team A's agent through the API: %d %s", code, body)
	}
	if got, n := attacker.received(); n != 0 {
		t.Fatalf("the attacker's server received %d requests, credentials %q; want none", n, got)
	}
	if code, body := message("b-facts"); code != http.StatusAccepted {
		t.Fatalf("team B's agent through the API: %d %s", code, body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if got, _ := bServer.received(); len(got) > 0 {
			if got[0] != "Bearer "+bToken {
				t.Fatalf("B's server received %q; want B's token", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B's server received no request for B's agent")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
