package runner_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/approvals"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model/scripted"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sampling"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// askServer is a real MCP server (go-sdk, streamable HTTP) whose tools ask their client
// while they run: "survey" elicits a name and a count and returns the answer, "sample"
// asks the client's model, "build" reports progress three times.
type askServer struct {
	URL string
	mu  sync.Mutex
	got []string // what each tool call learned
}

type noArgs struct{}

func newAskServer(t testing.TB) *askServer {
	t.Helper()
	t.Setenv("TF_TEST_GOV_TOKEN", govToken)
	a := &askServer{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "ask", Version: "1"}, nil)
	note := func(s string) {
		a.mu.Lock()
		a.got = append(a.got, s)
		a.mu.Unlock()
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "survey", Description: "Asks the user."}, func(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Which release should I tag?", RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name":  map[string]any{"type": "string", "description": "release name"},
				"count": map[string]any{"type": "integer", "minimum": 1, "maximum": 5, "default": 1},
			},
			"required": []any{"name"},
		}})
		if err != nil {
			note("error: " + err.Error())
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil, nil //nolint:nilerr // the tool reports it
		}
		got := res.Action
		if res.Action == "accept" {
			got += " " + res.Content["name"].(string)
		}
		note(got)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "user said: " + got}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "sample", Description: "Asks the model."}, func(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 50,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Say hi"}}}})
		if err != nil {
			note("refused: " + err.Error())
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "sampling failed: " + err.Error()}}}, nil, nil //nolint:nilerr // the tool reports it
		}
		text := res.Content.(*mcp.TextContent).Text
		note("sampled: " + text)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "model said: " + text}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "build", Description: "Reports progress."}, func(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
		// A long call: each step takes a while, as the progress of a real one does (the
		// client handles notifications as they come, beside the call).
		tok := req.Params.GetProgressToken()
		for i := 1; i <= 3; i++ {
			if tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3, Message: "step"})
			}
			time.Sleep(100 * time.Millisecond)
		}
		note("built")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "built"}}}, nil, nil
	})
	a.URL = serveMCP(t, srv, govToken).URL
	return a
}

func (a *askServer) learned() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.got...)
}

// asking is agent's runner whose toolset asks the session's user through the approvals
// gate and samples through a Sampler on pol.
func asking(t testing.TB, st *store.Store, agent, user string, pol *policy.Policy, samplingModel *scripted.Model) *runner.Runner {
	t.Helper()
	r := storeRunner(t, st, agent)
	gate := &approvals.Gate{Store: st, Poll: 20 * time.Millisecond}
	opts := mcptools.Options{User: user, Agent: agent, Owner: r.Agent.Owner, Credentials: r.Agent.Authority(nil, harnesstest.Owner),
		Approver: gate, Asker: gate}
	if pol != nil {
		opts.Policy = pol
	}
	s := &sampling.Sampler{Policy: pol, User: user, Owner: r.Agent.Owner, Agent: agent}
	if samplingModel != nil {
		s.Model = samplingModel
	}
	opts.Sampler = s
	ts := mcptools.New(r.Agent.Spec.MCPServers, opts)
	t.Cleanup(ts.Close)
	r.Tools.MCP = ts
	return r
}

func askAgent(t testing.TB, st *store.Store, agent string, a *askServer, turns ...map[string]any) {
	t.Helper()
	harnesstest.AddAgent(t, st, agent, "default", harnesstest.AgentSpec{
		"model":       harnesstest.Script(turns...),
		"mcp_servers": []any{map[string]any{"name": "ask", "url": a.URL, "credential_env": "TF_TEST_GOV_TOKEN"}},
	})
}

// A server's question during a call reaches the session's user as an approval of kind
// elicitation, which another replica answers: accepted with an answer that fits the
// schema (one that does not is refused first), or declined; the server gets the answer.
func TestElicitationAnsweredAndDeclined(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		answer func(t *testing.T, other *store.Store, a store.Approval) error
		want   string
	}{
		{"accepted", func(t *testing.T, other *store.Store, a store.Approval) error {
			if _, err := approvals.Answer(ctx, other, a.ID, "alice", map[string]any{"count": 9}, time.Now()); err == nil {
				t.Error("an answer without the required name and a count over its maximum was accepted")
			}
			_, err := approvals.Answer(ctx, other, a.ID, "alice", map[string]any{"name": "v1.2", "count": 2}, time.Now())
			return err
		}, "accept v1.2"},
		{"declined", func(t *testing.T, other *store.Store, a store.Approval) error {
			_, err := approvals.Decide(ctx, other, a.ID, "alice", false, "", time.Now())
			return err
		}, "decline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newAskServer(t)
			st, other := twoHandles(t)
			askAgent(t, st, "surveyor", srv, call("ask__survey", map[string]any{}), text("done"))
			r := asking(t, st, "surveyor", "alice", nil, nil)
			sid, err := r.NewSession(ctx, "alice")
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				a, err := pendingOf(other, "alice", sid)
				if err == nil {
					if a.Kind != store.ApprovalKindElicitation || a.Reason != "Which release should I tag?" || !strings.Contains(a.Schema, `"name"`) {
						t.Errorf("the question as stored: %+v", a)
					}
					if list, _ := approvals.Pending(ctx, other, "bob", sid); len(list) != 0 {
						t.Errorf("bob may answer alice's question: %+v", list)
					}
					err = tc.answer(t, other, a)
				}
				done <- err
			}()
			mustRun(t, r, sid, "survey")
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := srv.learned(); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("the server learned %v; want %q", got, tc.want)
			}
			res := results(t, st, sid)
			if len(res) != 1 || res[0]["text"] != "user said: "+tc.want {
				t.Fatalf("tool results %v", res)
			}
			inOrder(t, st, sid, events.KindToolCall, events.KindApprovalRequested, events.KindApprovalDecided, events.KindToolResult)
		})
	}
}

// Sampling is refused unless the operator's policy names the server: by default the
// server is told why and the model is not called; with the server in "sampling", the
// prompt runs on the agent's model.
func TestSamplingRefusedUnlessThePolicyNamesTheServer(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, policy, want string
	}{
		{"refused by default", `{"rules": [{"effect": "allow"}], "default": "deny"}`, "refused: "},
		{"allowed for the server", `{"rules": [{"effect": "allow"}], "default": "deny", "sampling": ["SERVER"]}`, "sampled: hello from the model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newAskServer(t)
			st, _ := twoHandles(t)
			askAgent(t, st, "sampler", srv, call("ask__sample", map[string]any{}), text("done"))
			model := scripted.New(&scripted.Script{Turns: []scripted.Turn{{Text: "hello from the model"}}})
			r := asking(t, st, "sampler", "alice", loadPolicy(t, strings.ReplaceAll(tc.policy, "SERVER", srv.URL)), model)
			sid, err := r.NewSession(ctx, "alice")
			if err != nil {
				t.Fatal(err)
			}
			mustRun(t, r, sid, "sample")
			got := srv.learned()
			if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
				t.Fatalf("the server learned %v; want %q", got, tc.want)
			}
			if strings.HasPrefix(tc.want, "refused") && !strings.Contains(got[0], `"sampling" list`) {
				t.Fatalf("the refusal does not say how to allow it: %q", got[0])
			}
		})
	}
}

// A long call's progress notifications stream to the user as the call's progress.
func TestProgressOfALongCallStreams(t *testing.T) {
	ctx := context.Background()
	srv := newAskServer(t)
	st, _ := twoHandles(t)
	askAgent(t, st, "builder", srv, call("ask__build", map[string]any{}), text("done"))
	r := asking(t, st, "builder", "alice", nil, nil)
	sid, err := r.NewSession(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var progress []string
	if _, err := r.Run(ctx, sid, "build", func(e runner.Event) {
		if e.Partial && e.Stream == "progress" {
			mu.Lock()
			progress = append(progress, e.Delta)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(progress, "") != "ask__build: 1/3 step\nask__build: 2/3 step\nask__build: 3/3 step\n" {
		t.Fatalf("progress %q", progress)
	}
}
