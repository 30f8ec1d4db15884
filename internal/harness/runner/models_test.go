package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// fakeOpenAI is an OpenAI-compatible Chat Completions server on loopback: it answers
// step n (the number of assistant messages in the request) with steps[n], streamed as
// SSE, and refuses requests without the expected bearer key.
type fakeOpenAI struct {
	key   string
	steps []fakeStep
	mu    sync.Mutex
	reqs  []string // request bodies
}

type fakeStep struct {
	text  string
	calls [][2]string // name, JSON arguments
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	key := f.key
	f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+key {
		http.Error(w, `{"error":{"message":"bad key","type":"invalid_request_error"}}`, http.StatusUnauthorized)
		return
	}
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, string(body))
	f.mu.Unlock()
	var req struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	n := 0
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	st := fakeStep{text: "done"}
	if n < len(f.steps) {
		st = f.steps[n]
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "fake-gpt",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	if st.text != "" {
		// Two deltas, to exercise streaming.
		half := len(st.text) / 2
		send(chunk(map[string]any{"role": "assistant", "content": st.text[:half]}, nil))
		send(chunk(map[string]any{"content": st.text[half:]}, nil))
	}
	for i, c := range st.calls {
		send(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": fmt.Sprintf("call_%d_%d", n, i), "type": "function",
			"function": map[string]any{"name": c[0], "arguments": c[1]}}}}, nil))
	}
	finish := "stop"
	if len(st.calls) > 0 {
		finish = "tool_calls"
	}
	send(chunk(map[string]any{}, finish))
	send(map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "fake-gpt", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// The model key and an MCP credential never reach the sandbox (environment, files,
// process list), the store in plaintext, or the harness logs; both are used in the same
// session (the model server and a real MCP server refuse requests without them). The attack: code in the sandbox dumps every environment and command
// line it can see and writes them to a file.
func TestCredentialsNeverLeaveTheHarness(t *testing.T) {
	f := newFixture(t)
	modelKey := "sk-model-CANARY-7f3a9b2e4d"
	mcpToken := "mcp-token-CANARY-c81d5e0a92"
	t.Setenv("TF_TEST_MODEL_KEY", modelKey)
	t.Setenv("TF_TEST_MCP_TOKEN", mcpToken)
	dump := "env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; ps -eo args 2>/dev/null; ls -la /run /tmp /workspace 2>/dev/null"
	args, _ := json.Marshal(map[string]string{"command": dump + " > /workspace/dump.txt; cat /workspace/dump.txt"})
	// A real MCP server that requires the MCP token: the harness uses it in this session.
	mcpSrv := mcp.NewServer(&mcp.Implementation{Name: "kb", Version: "1"}, nil)
	mcp.AddTool(mcpSrv, &mcp.Tool{Name: "lookup", Description: "Look something up."}, func(ctx context.Context, req *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "kb says hi"}}}, nil, nil
	})
	mts := serveMCP(t, mcpSrv, mcpToken)
	srv := &fakeOpenAI{key: modelKey, steps: []fakeStep{
		{calls: [][2]string{{"kb__lookup", `{"q":"x"}`}}},
		{text: "Looking around.", calls: [][2]string{{"exec", string(args)}}},
		{calls: [][2]string{{"offer_artifact", `{"path":"dump.txt"}`}}},
		{text: "Nothing to see."},
	}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	harnesstest.AddAgent(t, f.env.Store, "creds", "default", harnesstest.AgentSpec{
		"model":       map[string]any{"provider": "openai", "name": "fake-gpt", "base_url": ts.URL + "/v1", "api_key_env": "TF_TEST_MODEL_KEY"},
		"mcp_servers": []any{map[string]any{"name": "kb", "url": mts.URL, "credential_env": "TF_TEST_MCP_TOKEN"}},
		"sandbox":     harnesstest.Sandbox("default", 15, 60, 120),
	})
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := f.runner(t, "creds")
	r.Logger = logger
	m, err := r.Agent.NewModel(agents.ModelOptions{HTTPClient: ts.Client(), Credentials: r.Agent.Authority(nil, harnesstest.Owner)})
	if err != nil {
		t.Fatal(err)
	}
	r.Model = m
	r.Tools.MCP = mcptools.New(r.Agent.Spec.MCPServers, mcptools.Options{Logger: logger, Credentials: r.Agent.Authority(nil, harnesstest.Owner)})
	sid, _ := r.NewSession(context.Background(), harnesstest.Owner)
	var streamed strings.Builder
	out, err := r.Run(context.Background(), sid, "look around", func(e runner.Event) {
		if e.Partial && e.Stream == "text" {
			streamed.WriteString(e.Delta)
		}
	})
	if err != nil || out.Status != store.RunCompleted {
		t.Fatalf("run: %v %s", err, out.Status)
	}
	if out.Text != "Nothing to see." || !strings.Contains(streamed.String(), "Looking around.") {
		t.Fatalf("final %q, streamed %q", out.Text, streamed.String())
	}
	if len(srv.reqs) != 4 {
		t.Fatalf("model server saw %d authorized requests; want 4 (the key is used)", len(srv.reqs))
	}
	res := results(t, f.env.Store, sid)
	if res[0]["text"] != "kb says hi" {
		t.Fatalf("the MCP call (with its credential) failed: %v", res[0])
	}
	dumped := res[1]["text"].(string)
	if !strings.Contains(dumped, "GREETING=hello") || !strings.Contains(dumped, "exit_code: 0") {
		t.Fatalf("the dump did not run in the sandbox: %q", dumped)
	}
	sawDump := false
	for _, secret := range []string{modelKey, mcpToken} {
		if strings.Contains(dumped, secret) {
			t.Errorf("a credential is visible inside the sandbox")
		}
		for i, body := range srv.reqs {
			// The model may see the key only as the Authorization header, never in content.
			if strings.Contains(body, secret) {
				t.Errorf("model request %d carries a credential in its body", i)
			}
		}
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the harness log contains a credential")
		}
	}
	// Every file the harness or the sandbox wrote: the database (and its WAL), the
	// sandbox's upper layers, workspace and disk image (its data extents), run
	// directories. sync(2) first, so what the sandbox wrote is on the image.
	syscall.Sync()
	_ = filepath.WalkDir(f.env.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil //nolint:nilerr // what cannot be read holds no secret to find
		}
		found, err := harnesstest.FileContains(p, []byte(modelKey), []byte(mcpToken), []byte("/workspace:"))
		if err != nil {
			return nil //nolint:nilerr // what cannot be read holds no secret to find
		}
		if found[0] || found[1] {
			t.Errorf("file %s contains a credential", p)
		}
		if found[2] && d.Name() == "disk.img" {
			sawDump = true
		}
		return nil
	})
	if !sawDump {
		t.Error("the sandbox's disk image was not searched: the listing written into its workspace was not found in it")
	}
	arts, _ := f.env.Store.ListArtifacts(context.Background(), sid)
	if len(arts) != 1 || arts[0].Path != "dump.txt" || arts[0].Classification != "untrusted" || arts[0].SnapshotID != f.env.Snapshot ||
		len(arts[0].Commands) != 1 || arts[0].SourceEvent == 0 {
		t.Fatalf("artifact lineage %+v", arts)
	}
}

// The Anthropic client over a fake Messages server: the key is sent as the SDK sends it, a
// streamed tool_use is run, its result goes back as a tool_result block, and an agent
// without a sandbox never has sandbox tools.
func TestAnthropicModelRunsToolLoop(t *testing.T) {
	st := harnesstest.NewStore(t)
	ctx := context.Background()
	key := "sk-ant-CANARY-1234"
	t.Setenv("TF_TEST_ANTHROPIC_KEY", key)
	var mu sync.Mutex
	var bodies []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The SDK (v2.15) sends the key as a bearer token; x-api-key is the older form.
		if r.Header.Get("X-Api-Key") != key && r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, `{"type":"error","error":{"type":"authentication_error","message":"bad key"}}`, http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(body))
		n := len(bodies)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		ev := func(name string, v any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		}
		ev("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant",
			"model": "fake-claude", "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 50, "output_tokens": 1}}})
		stop := "end_turn"
		if n == 1 {
			ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": "toolu_1", "name": "read_output", "input": map[string]any{}}})
			ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": `{"call_id":"nope"}`}})
			ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
			stop = "tool_use"
		} else {
			ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
			ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "All "}})
			ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "good."}})
			ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		}
		ev("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 7}})
		ev("message_stop", map[string]any{"type": "message_stop"})
	}))
	defer ts.Close()
	// An agent without a sandbox needs no environment to be Ready.
	harnesstest.SeedNoSandbox(t, st)
	harnesstest.AddAgent(t, st, "claude", "default", harnesstest.AgentSpec{
		"model":   map[string]any{"provider": "anthropic", "name": "fake-claude", "base_url": ts.URL, "api_key_env": "TF_TEST_ANTHROPIC_KEY"},
		"sandbox": map[string]any{"enabled": false},
	})
	a, err := agents.Load(ctx, st, "claude")
	if err != nil {
		t.Fatal(err)
	}
	m, err := a.NewModel(agents.ModelOptions{HTTPClient: ts.Client(), Credentials: a.Authority(nil, harnesstest.Owner)})
	if err != nil {
		t.Fatal(err)
	}
	r := &runner.Runner{Store: st, Agent: a, Model: m, Tools: &tools.Executor{Store: st}}
	sid, _ := r.NewSession(ctx, harnesstest.Owner)
	out, err := r.Run(ctx, sid, "hi", nil)
	if err != nil || out.Status != store.RunCompleted || out.Text != "All good." {
		t.Fatalf("run: %v %+v %v", err, out, harnesstest.Payloads(t, st, sid, events.KindError))
	}
	if out.InputTokens != 100 || out.OutputTokens != 14 {
		t.Fatalf("usage %d/%d; want 100/14", out.InputTokens, out.OutputTokens)
	}
	if len(bodies) != 2 || !strings.Contains(bodies[1], `"tool_result"`) || !strings.Contains(bodies[1], `"is_error":true`) {
		t.Fatalf("second request lacks the error tool_result: %s", bodies[len(bodies)-1])
	}
	for _, name := range []string{`"exec"`, `"write_file"`} {
		if strings.Contains(bodies[0], name) {
			t.Fatalf("an agent without a sandbox was offered %s", name)
		}
	}
}

// A missing key variable is a clear error naming the variable, not a request.
func TestMissingModelKeyNamesTheVariable(t *testing.T) {
	st := harnesstest.NewStore(t)
	ctx := context.Background()
	_ = st.CreateSandboxProvider(ctx, store.SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: harnesstest.Owner})
	_, _, _ = st.ClaimSnapshot(ctx, store.Snapshot{ID: "snap-x", Provider: "local", BuildHash: "h", Spec: "{}"}, "Building", "Failed")
	_ = st.CreateEnvironment(ctx, store.Environment{ID: "e", Name: "default", Provider: "local", Owner: harnesstest.Owner, Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h", SnapshotID: "snap-x"})
	harnesstest.AddAgent(t, st, "nokey", "default", harnesstest.AgentSpec{
		"model": map[string]any{"provider": "openai", "name": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "TF_TEST_UNSET_KEY_VAR"},
	})
	a, err := agents.Load(ctx, st, "nokey")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := a.NewModel(agents.ModelOptions{Credentials: a.Authority(nil, harnesstest.Owner)})
	r := &runner.Runner{Store: st, Agent: a, Model: m, Tools: &tools.Executor{Store: st}}
	sid, _ := r.NewSession(ctx, harnesstest.Owner)
	out, _ := r.Run(ctx, sid, "hi", nil)
	errs := harnesstest.Payloads(t, st, sid, events.KindError)
	if out.Status != store.RunFailed || len(errs) != 1 || !strings.Contains(errs[0]["message"].(string), "TF_TEST_UNSET_KEY_VAR") {
		t.Fatalf("status %s, errors %v; want a failure naming TF_TEST_UNSET_KEY_VAR", out.Status, errs)
	}
}

// The key is read at each call: rotating the variable reaches the next model call
// without rebuilding anything.
func TestModelKeyIsReadAtCallTime(t *testing.T) {
	st := seeded(t)
	srv := &fakeOpenAI{key: "sk-first", steps: []fakeStep{{text: "one"}, {text: "two"}}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	t.Setenv("TF_TEST_ROTATING_KEY", "sk-first")
	harnesstest.AddAgent(t, st, "rot", "default", harnesstest.AgentSpec{
		"model": map[string]any{"provider": "openai", "name": "fake-gpt", "base_url": ts.URL + "/v1", "api_key_env": "TF_TEST_ROTATING_KEY"},
	})
	r := storeRunner(t, st, "rot")
	m, err := r.Agent.NewModel(agents.ModelOptions{HTTPClient: ts.Client(), Credentials: r.Agent.Authority(nil, harnesstest.Owner)})
	if err != nil {
		t.Fatal(err)
	}
	r.Model = m
	ctx := context.Background()
	sid, _ := r.NewSession(ctx, harnesstest.Owner)
	if out := mustRun(t, r, sid, "a"); out.Text != "one" {
		t.Fatalf("first answer %q", out.Text)
	}
	srv.mu.Lock()
	srv.key = "sk-second"
	srv.mu.Unlock()
	t.Setenv("TF_TEST_ROTATING_KEY", "sk-second")
	if out := mustRun(t, r, sid, "b"); out.Text != "two" {
		t.Fatalf("after rotation %q", out.Text)
	}
}
