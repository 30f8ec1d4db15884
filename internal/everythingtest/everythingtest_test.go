package everythingtest

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connect opens a session of a client with opts to the server at endpoint, closed when t
// ends.
func connect(t *testing.T, endpoint string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "everythingtest", Version: "0"}, opts)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	t.Logf("protocol version %s, server %s %s", cs.InitializeResult().ProtocolVersion,
		cs.InitializeResult().ServerInfo.Name, cs.InitializeResult().ServerInfo.Version)
	return cs
}

// toolNames lists the session's tools.
func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatalf("listing tools: %v", err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// call calls tool with args and returns the text of its result. For args nil the SDK
// sends "arguments": {}; a typed nil (a nil map) would send "arguments": null, which the
// server rejects ("expected record, received null").
func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", tool, err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	if res.IsError {
		t.Fatalf("%s failed: %s", tool, strings.Join(text, "\n"))
	}
	return strings.Join(text, "\n")
}

// TestStart: the server listens on loopback only, at Path, and answers a session of the
// go-sdk's client; a client without elicitation or sampling is offered neither tool.
func TestStart(t *testing.T) {
	endpoint := Start(t)
	u, err := url.Parse(endpoint)
	if err != nil || u.Hostname() != "127.0.0.1" || u.Path != Path {
		t.Fatalf("endpoint %q: want http://127.0.0.1:PORT%s (%v)", endpoint, Path, err)
	}
	cs := connect(t, endpoint, nil)
	names := toolNames(t, cs)
	for _, want := range []string{"echo", "trigger-long-running-operation"} {
		if !slices.Contains(names, want) {
			t.Errorf("tool %s is not listed: %v", want, names)
		}
	}
	for _, unwanted := range []string{"trigger-elicitation-request", "trigger-sampling-request"} {
		if slices.Contains(names, unwanted) {
			t.Errorf("tool %s is listed to a client without the capability: %v", unwanted, names)
		}
	}
	if got, want := call(t, cs, "echo", map[string]any{"message": "hello, everything"}), "Echo: hello, everything"; got != want {
		t.Errorf("echo: got %q, want %q", got, want)
	}
}

// TestElicitation: the server's elicitation/create, sent while it runs
// trigger-elicitation-request, reaches the client's ElicitationHandler, and its answer
// reaches the tool.
func TestElicitation(t *testing.T) {
	endpoint := Start(t)
	var asked atomic.Int32
	var message atomic.Value
	cs := connect(t, endpoint, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			message.Store(req.Params.Message)
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	if names := toolNames(t, cs); !slices.Contains(names, "trigger-elicitation-request") {
		t.Fatalf("trigger-elicitation-request is not listed to a client with elicitation: %v", names)
	}
	got := call(t, cs, "trigger-elicitation-request", nil)
	if n := asked.Load(); n != 1 {
		t.Fatalf("the elicitation handler was called %d times, want once; the tool said:\n%s", n, got)
	}
	if m, _ := message.Load().(string); !strings.Contains(m, "Please provide inputs") {
		t.Errorf("elicitation message %q", m)
	}
	if !strings.Contains(got, "User declined") || !strings.Contains(got, `"action": "decline"`) {
		t.Errorf("the tool's result does not reflect the decline:\n%s", got)
	}
}

// TestSampling: the server's sampling/createMessage, sent while it runs
// trigger-sampling-request, reaches the client's CreateMessageHandler, and its answer
// reaches the tool.
func TestSampling(t *testing.T) {
	endpoint := Start(t)
	var prompt atomic.Value
	cs := connect(t, endpoint, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			if len(req.Params.Messages) > 0 {
				if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
					prompt.Store(tc.Text)
				}
			}
			return &mcp.CreateMessageResult{Model: "stub-model", Role: "assistant", Content: &mcp.TextContent{Text: "sampled answer"}}, nil
		},
	})
	if names := toolNames(t, cs); !slices.Contains(names, "trigger-sampling-request") {
		t.Fatalf("trigger-sampling-request is not listed to a client with sampling: %v", names)
	}
	got := call(t, cs, "trigger-sampling-request", map[string]any{"prompt": "say something", "maxTokens": 10})
	if p, _ := prompt.Load().(string); !strings.Contains(p, "say something") {
		t.Errorf("the sampling handler got prompt %q", p)
	}
	if !strings.Contains(got, "sampled answer") || !strings.Contains(got, "stub-model") {
		t.Errorf("the tool's result does not hold the sampled answer:\n%s", got)
	}
}

// TestProgress: trigger-long-running-operation reports progress to a client that asks
// for it with a progress token.
func TestProgress(t *testing.T) {
	endpoint := Start(t)
	var progress atomic.Int32
	cs := connect(t, endpoint, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	params := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 1, "steps": 3}}
	params.SetProgressToken("everythingtest")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("calling trigger-long-running-operation: %v %v", err, res)
	}
	// The client handles notifications apart from responses: the last may come after the
	// result.
	for deadline := time.Now().Add(5 * time.Second); progress.Load() < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := progress.Load(); n != 3 {
		t.Errorf("got %d progress notifications, want 3", n)
	}
}

// TestCleanup: when the test that started the server ends, the server has gone with
// its process group: nothing listens on its port any more.
func TestCleanup(t *testing.T) {
	var endpoint string
	t.Run("start", func(t *testing.T) { endpoint = Start(t) })
	if t.Failed() || endpoint == "" {
		return
	}
	u, _ := url.Parse(endpoint)
	conn, err := net.DialTimeout("tcp", u.Host, time.Second)
	if err == nil {
		conn.Close()
		t.Fatalf("%s still accepts connections after its test ended", u.Host)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dialing %s after its test ended: %v, want connection refused", u.Host, err)
	}
}

// TestVersion: the version that the lookup in the tool cache expects is the one that
// scripts/ensure-server-everything.sh installs.
func TestVersion(t *testing.T) {
	script, err := os.ReadFile("../../scripts/ensure-server-everything.sh")
	if err != nil {
		t.Fatal(err)
	}
	if want := `version="${SERVER_EVERYTHING_VERSION:-` + Version + `}"`; !strings.Contains(string(script), want) {
		t.Errorf("scripts/ensure-server-everything.sh does not hold %s: the tool cache's lookup and the script disagree", want)
	}
}
