package runner_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/codemode"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
)

// cityIn is the input of the test MCP server's tools.
type cityIn struct {
	City string `json:"city" jsonschema:"the city"`
}

// kbServer is a real streamable HTTP MCP server (go-sdk) that requires a bearer token
// and records the subject header of each tool call.
type kbServer struct {
	URL   string
	token string
	mu    sync.Mutex
	users []string // X-Trueforge-User of each tool call, in order
	// slow, when set, is waited on by the slow tool (closed to release it).
	slow      chan struct{}
	slowEnter chan struct{}
}

func newKB(t testing.TB, token string) *kbServer {
	t.Helper()
	kb := &kbServer{token: token, slow: make(chan struct{}), slowEnter: make(chan struct{}, 16)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "kb", Version: "1"}, nil)
	seen := func(req *mcp.CallToolRequest) {
		kb.mu.Lock()
		defer kb.mu.Unlock()
		kb.users = append(kb.users, req.Extra.Header.Get(mcptools.UserHeader))
	}
	// The output schema declares city and temp_c; the result carries one more field.
	forecastSchema := map[string]any{"type": "object", "properties": map[string]any{
		"city": map[string]any{"type": "string"}, "temp_c": map[string]any{"type": "number"}}, "required": []any{"city", "temp_c"}}
	mcp.AddTool(srv, &mcp.Tool{Name: "forecast", Description: "Today's forecast for a city.", OutputSchema: forecastSchema}, func(ctx context.Context, req *mcp.CallToolRequest, in cityIn) (*mcp.CallToolResult, any, error) {
		seen(req)
		return &mcp.CallToolResult{StructuredContent: map[string]any{"city": in.City, "temp_c": 21.5, "internal_note": "NOT-FOR-SCRIPTS"}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "population", Description: "How many people live in a city."}, func(ctx context.Context, req *mcp.CallToolRequest, in cityIn) (*mcp.CallToolResult, any, error) {
		seen(req)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "2100000"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow", Description: "Takes as long as the test wants."}, func(ctx context.Context, req *mcp.CallToolRequest, in cityIn) (*mcp.CallToolResult, any, error) {
		seen(req)
		kb.slowEnter <- struct{}{}
		<-kb.slow
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slow done for " + in.City}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() {
		select {
		case <-kb.slow:
		default:
			close(kb.slow)
		}
	})
	kb.URL = ts.URL
	return kb
}

func (kb *kbServer) seenUsers() []string {
	kb.mu.Lock()
	defer kb.mu.Unlock()
	return append([]string(nil), kb.users...)
}

// codeAgent adds an agent with Code Mode over kb and returns a runner for user with its
// Code Mode wired as the harness wires it.
func (f *fixture) codeAgent(t testing.TB, name string, kb *kbServer, limits map[string]any, user string, policy mcptools.Decider, turns ...map[string]any) (*runner.Runner, *codemode.Mode) {
	t.Helper()
	spec := harnesstest.AgentSpec{
		"model":       harnesstest.Script(turns...),
		"mcp_servers": []any{map[string]any{"name": "kb", "url": kb.URL, "credential_env": "TF_TEST_KB_TOKEN"}},
		"sandbox":     harnesstest.Sandbox("default", 15, 60, 120),
		"code_mode":   true,
	}
	if limits != nil {
		spec["code_mode_limits"] = limits
	}
	harnesstest.AddAgent(t, f.env.Store, name, "default", spec)
	return f.codeRunner(t, name, user, policy)
}

func (f *fixture) codeRunner(t testing.TB, name, user string, policy mcptools.Decider) (*runner.Runner, *codemode.Mode) {
	t.Helper()
	r := f.runner(t, name)
	ts := mcptools.New(r.Agent.Spec.MCPServers, mcptools.Options{User: user, Agent: name, Policy: policy})
	t.Cleanup(ts.Close)
	r.Tools.MCP = ts
	cm := codemode.New(ts, nil)
	r.Tools.Code = cm
	t.Cleanup(func() { _ = cm.Wait(context.Background()) })
	return r, cm
}

func runCode(lang, code string) map[string]any {
	return call(codemode.ToolName, map[string]any{"language": lang, "code": code})
}

// A script calls two tools of a real MCP server (bearer token required) and combines
// their results; the model sees only what the script printed, and the declared output
// schema keeps an undeclared field from the script. Each call is in the log with its
// subject and outcome, and the server saw the session owner's identity.
func TestCodeModeScriptCombinesTwoTools(t *testing.T) {
	for _, lang := range []string{codemode.Python, codemode.JavaScript} {
		t.Run(lang, func(t *testing.T) {
			f := newFixture(t)
			t.Setenv("TF_TEST_KB_TOKEN", "kb-CANARY-71d0")
			kb := newKB(t, "kb-CANARY-71d0")
			code := `f = kb.forecast(city="Paris")
p = kb.population(city="Paris")
print("combined:", f["city"], f["temp_c"], int(p) // 1000, sorted(f))`
			if lang == codemode.JavaScript {
				code = `const f = await kb.forecast({city: "Paris"});
const p = await kb.population({city: "Paris"});
console.log("combined:", f.city, f.temp_c, Math.floor(Number(p) / 1000), Object.keys(f).sort().join(","));`
			}
			r, _ := f.codeAgent(t, "coder", kb, nil, harnesstest.Owner, nil, runCode(lang, code), text("done"))
			specs := r.Tools.AllSpecs(context.Background(), r.Agent)
			var desc string
			for _, s := range specs {
				if strings.HasPrefix(s.Name, "kb__") {
					t.Fatalf("with Code Mode the MCP tools are offered directly too: %s", s.Name)
				}
				if s.Name == codemode.ToolName {
					desc = s.Description
				}
			}
			if !strings.Contains(desc, "forecast") || !strings.Contains(desc, "population") {
				t.Fatalf("the run_code description does not carry the API:\n%s", desc)
			}
			sid, _ := r.NewSession(context.Background(), harnesstest.Owner)
			mustRun(t, r, sid, "how is Paris?")
			res := results(t, f.env.Store, sid)
			if len(res) != 1 || res[0]["is_error"] == true {
				t.Fatalf("run_code result %v", res)
			}
			out := res[0]["text"].(string)
			if !strings.Contains(out, "exit code 0") || !strings.Contains(out, "combined: Paris 21.5 2100") {
				t.Fatalf("the script's output %q; want the combined results", out)
			}
			if strings.Contains(out, "internal_note") || strings.Contains(out, "NOT-FOR-SCRIPTS") {
				t.Fatalf("a field forecast's output schema does not declare reached the script: %q", out)
			}
			calls := payloads(t, f.env.Store, sid, events.KindMCPCall)
			if len(calls) != 2 {
				t.Fatalf("mcp_call records %v; want 2", calls)
			}
			for i, c := range calls {
				if c["outcome"] != events.OutcomeCompleted || c["user"] != harnesstest.Owner || c["agent"] != "coder" ||
					c["args_sha256"] == "" || c["result_bytes"].(float64) <= 0 || c["tool_call_id"] == "" {
					t.Fatalf("mcp_call %d: %v", i, c)
				}
			}
			if got := kb.seenUsers(); len(got) != 2 || got[0] != harnesstest.Owner || got[1] != harnesstest.Owner {
				t.Fatalf("the MCP server saw users %q; want the session owner on each call", got)
			}
		})
	}
}
