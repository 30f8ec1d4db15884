package runner_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
)

type lookupIn struct {
	Q string `json:"q" jsonschema:"what to look up"`
}

// An MCP-only turn provisions no sandbox: the MCP call goes from the harness to a real
// streamable HTTP MCP server (go-sdk) with the credential the agent names, an MCP tool
// outside allowed_tools is neither listed nor callable, and the counted local runtime
// sees no call.
// mcpTestServer is an MCP server on loopback that serves only the requests that carry
// its token as a Bearer, counting those it serves and those it refuses.
type mcpTestServer struct {
	*httptest.Server
	authorized, refused atomic.Int64
}

// serveMCP serves srv over streamable HTTP as an mcpTestServer for token, closed when
// the test ends.
func serveMCP(t testing.TB, srv *mcp.Server, token string) *mcpTestServer {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	s := &mcpTestServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			s.refused.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		s.authorized.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func TestMCPOnlyTurnProvisionsNoSandbox(t *testing.T) {
	f := newFixture(t)
	token := "mcp-CANARY-5e1f"
	t.Setenv("TF_TEST_MCP_TOKEN", token)
	srv := mcp.NewServer(&mcp.Implementation{Name: "kb", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Description: "Look something up."}, func(ctx context.Context, req *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answer for " + in.Q}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "drop_tables", Description: "Not for agents."}, func(ctx context.Context, req *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, any, error) {
		t.Error("a tool outside allowed_tools was called")
		return nil, nil, nil
	})
	ts := serveMCP(t, srv, token)
	authorized, refused := &ts.authorized, &ts.refused
	harnesstest.AddAgent(t, f.env.Store, "mcpagent", "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			call("kb__lookup", map[string]any{"q": "trueforge"}),
			call("kb__drop_tables", map[string]any{"q": "all"}),
			text("done"),
		),
		"mcp_servers": []any{map[string]any{"name": "kb", "url": ts.URL, "credential_env": "TF_TEST_MCP_TOKEN", "allowed_tools": []string{"lookup"}}},
		"sandbox":     harnesstest.Sandbox("default", 15, 60, 120),
	})
	r := f.runner(t, "mcpagent")
	ts2 := mcptools.New(r.Agent.Spec.MCPServers, mcptools.Options{Credentials: r.Agent.Authority(nil, harnesstest.Owner)})
	defer ts2.Close()
	r.Tools.MCP = ts2
	specs := r.Tools.AllSpecs(context.Background(), r.Agent)
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "kb__lookup") || strings.Contains(strings.Join(names, ","), "drop_tables") {
		t.Fatalf("tool list %v; want kb__lookup and not drop_tables", names)
	}
	sid, _ := r.NewSession(context.Background(), harnesstest.Owner)
	mustRun(t, r, sid, "look it up")
	res := results(t, f.env.Store, sid)
	if len(res) != 2 || res[0]["text"] != "answer for trueforge" || res[0]["is_error"] == true {
		t.Fatalf("MCP results %v", res)
	}
	if res[1]["is_error"] != true {
		t.Fatalf("a tool outside allowed_tools was callable: %v", res[1])
	}
	if n := f.env.Runtime.Total(); n != 0 {
		t.Fatalf("an MCP-only turn made %d sandbox backend calls; want 0", n)
	}
	if authorized.Load() == 0 || refused.Load() != 0 {
		t.Fatalf("MCP requests: %d authorized, %d refused; the credential was not sent as the agent named it", authorized.Load(), refused.Load())
	}
}
