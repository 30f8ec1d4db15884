package runner_test

import (
	"context"
	"fmt"
	osexec "os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/codemode"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
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
	// traceparents is the W3C traceparent header of each tool call, in order.
	traceparents []string
	// slow, when set, is waited on by the slow tool (closed to release it).
	slow      chan struct{}
	slowEnter chan struct{}
}

// newKB serves the kb MCP server for token, which it also sets as TF_TEST_KB_TOKEN, the
// variable the tests' agents name as the server's credential.
func newKB(t testing.TB, token string) *kbServer {
	t.Helper()
	t.Setenv("TF_TEST_KB_TOKEN", token)
	kb := &kbServer{token: token, slow: make(chan struct{}), slowEnter: make(chan struct{}, 16)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "kb", Version: "1"}, nil)
	seen := func(req *mcp.CallToolRequest) {
		kb.mu.Lock()
		defer kb.mu.Unlock()
		kb.users = append(kb.users, req.Extra.Header.Get(mcptools.UserHeader))
		kb.traceparents = append(kb.traceparents, req.Extra.Header.Get("traceparent"))
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
	ts := serveMCP(t, srv, token)
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

func (kb *kbServer) seenTraceparents() []string {
	kb.mu.Lock()
	defer kb.mu.Unlock()
	return append([]string(nil), kb.traceparents...)
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
	return r, withCodeMode(t, r, mcptools.Options{User: user, Agent: name, Owner: r.Agent.Owner, Policy: policy})
}

// withCodeMode gives r the agent's MCP toolset with opts and the agent's credentials
// (closed when the test ends) and Code Mode over it, whose calls the test's end waits
// for.
func withCodeMode(t testing.TB, r *runner.Runner, opts mcptools.Options) *codemode.Mode {
	opts.Credentials = r.Agent.Authority(nil, harnesstest.Owner)
	ts := mcptools.New(r.Agent.Spec.MCPServers, opts)
	t.Cleanup(ts.Close)
	r.Tools.MCP = ts
	cm := codemode.New(ts, nil)
	r.Tools.Code = cm
	t.Cleanup(func() { _ = cm.Wait(context.Background()) })
	return cm
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
			calls := harnesstest.Payloads(t, f.env.Store, sid, events.KindMCPCall)
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

// The MCP token never reaches the sandbox: a script that dumps what it can see while
// its bridge is in use (its environment, every process's command line and environment,
// the files of the workspace and /tmp, its own stubs and the answers the bridge
// brought) finds no trace of it. Checked on the dump the script wrote into the
// workspace, read from the host side.
func TestCodeModeTokenNeverInSandbox(t *testing.T) {
	f := newFixture(t)
	const token = "kb-CANARY-3f9a2c"
	kb := newKB(t, token)
	code := `import os, glob, sys, tools
parts = []
parts.append("ENV " + repr(dict(os.environ)))
answer = repr(kb.forecast(city="Oslo")) + repr(kb.population(city="Oslo"))
parts.append("ANSWER " + answer)
open("/workspace/answer.txt", "w").write(answer)
for d in glob.glob("/proc/[0-9]*"):
    for name in ("cmdline", "environ"):
        try:
            parts.append(d + "/" + name + " " + open(d + "/" + name, "rb").read().decode("latin-1"))
        except OSError as e:
            parts.append(d + "/" + name + " unreadable " + str(e))
for root in ("/workspace", "/tmp"):
    for dirpath, dirs, files in os.walk(root):
        for n in files:
            p = os.path.join(dirpath, n)
            try:
                parts.append("FILE " + p + " " + open(p, "rb").read().decode("latin-1"))
            except OSError as e:
                parts.append("FILE " + p + " unreadable " + str(e))
parts.append("STUBS " + tools.__source__ + repr(vars(tools)))
for fd in os.listdir("/proc/self/fd"):
    try:
        parts.append("FD " + fd + " -> " + os.readlink("/proc/self/fd/" + fd))
    except OSError:
        pass
open("/workspace/dump.txt", "w").write("\n".join(parts))
print("dumped", len(parts))`
	r, _ := f.codeAgent(t, "coder", kb, nil, harnesstest.Owner, nil, runCode(codemode.Python, code), text("done"))
	sid, _ := r.NewSession(context.Background(), harnesstest.Owner)
	mustRun(t, r, sid, "dump")
	res := results(t, f.env.Store, sid)
	if len(res) != 1 || !strings.Contains(res[0]["text"].(string), "dumped") {
		t.Fatalf("the dump script did not run: %v", res)
	}
	rec, err := f.env.Store.GetSessionSandbox(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	dump, err := f.env.Runtime.ReadFile(context.Background(), rec.SandboxID, "dump.txt", 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ENV ", "python3", "ANSWER {'city': 'Oslo'", "FILE /workspace/answer.txt {'city'", "STUBS ", `__trueforge_call__("kb__forecast"`} {
		if !strings.Contains(string(dump), want) {
			t.Fatalf("the dump lacks %q: it did not see what it should have (%d bytes)", want, len(dump))
		}
	}
	if strings.Contains(string(dump), token) || strings.Contains(string(dump), "TF_TEST_KB_TOKEN") {
		t.Fatalf("the sandbox saw the MCP token or its variable")
	}
}

// Two users run the same agent: each call reaches the server with its own user's
// identity, and an operator policy that denies one user a tool denies only them (the
// refusal is recorded, nothing is sent).
func TestCodeModeCallsActForTheSessionOwner(t *testing.T) {
	f := newFixture(t)
	kb := newKB(t, "tok")
	pol := denyFor{user: "bob", tool: "forecast"}
	code := `try:
    print("forecast", kb.forecast(city="Rome")["temp_c"])
except ToolError as e:
    print("refused:", e)
print("population", kb.population(city="Rome"))`
	alice, _ := f.codeAgent(t, "coder", kb, nil, "alice", pol, runCode(codemode.Python, code), text("done"))
	bob, _ := f.codeRunner(t, "coder", "bob", pol)
	outs := map[string]string{}
	for user, r := range map[string]*runner.Runner{"alice": alice, "bob": bob} {
		sid, _ := r.NewSession(context.Background(), user)
		mustRun(t, r, sid, "weather?")
		outs[user] = results(t, f.env.Store, sid)[0]["text"].(string)
		calls := harnesstest.Payloads(t, f.env.Store, sid, events.KindMCPCall)
		if len(calls) != 2 || calls[0]["user"] != user || calls[1]["user"] != user {
			t.Fatalf("%s's records %v", user, calls)
		}
		want := events.OutcomeCompleted
		if user == "bob" {
			want = events.OutcomeDenied
		}
		if calls[0]["outcome"] != want || calls[1]["outcome"] != events.OutcomeCompleted {
			t.Fatalf("%s's forecast %v, population %v; want %s and completed", user, calls[0]["outcome"], calls[1]["outcome"], want)
		}
		// The rule that decided is recorded with each call: denyFor's rule 0 refused
		// bob's forecast, its default (-1) let the rest through.
		wantRule := -1.0
		if user == "bob" {
			wantRule = 0
		}
		if calls[0]["rule"] != wantRule || calls[1]["rule"] != -1.0 {
			t.Fatalf("%s's records name rules %v and %v; want %v and -1", user, calls[0]["rule"], calls[1]["rule"], wantRule)
		}
	}
	if !strings.Contains(outs["alice"], "forecast 21.5") || !strings.Contains(outs["bob"], "refused:") || !strings.Contains(outs["bob"], "bob is not allowed") ||
		!strings.Contains(outs["bob"], "population 2100000") {
		t.Fatalf("outputs %q", outs)
	}
	// The server saw alice twice and bob once (his forecast was never sent).
	seen := strings.Join(kb.seenUsers(), ",")
	if strings.Count(seen, "alice") != 2 || strings.Count(seen, "bob") != 1 {
		t.Fatalf("the server saw users %q; want alice twice and bob once", seen)
	}
}

// denyFor denies one user one tool.
type denyFor struct{ user, tool string }

func (d denyFor) Decide(r policy.Request) policy.Decision {
	if r.User == d.user && r.Tool == d.tool {
		return policy.Decision{Allow: false, Rule: 0, Reason: d.user + " is not allowed " + d.tool}
	}
	return policy.Decision{Allow: true, Rule: -1}
}

// Cancel while a script waits in a slow MCP call: the run ends at once, the script and
// the processes it started are gone (seen from the host), the call is recorded as
// unknown and, once the server answers, as completed (late); the next turn's history
// carries both, and the session goes on.
func TestCodeModeCancelInsideAnMCPCall(t *testing.T) {
	f := newFixture(t)
	kb := newKB(t, "tok")
	marker := "600.7" + randMarker()
	code := `import subprocess
subprocess.Popen(["sleep", "` + marker + `"])
print(kb.slow(city="Lima"))`
	r, cm := f.codeAgent(t, "coder", kb, nil, harnesstest.Owner, nil, runCode(codemode.Python, code), text("next turn"))
	sid, _ := r.NewSession(context.Background(), harnesstest.Owner)
	cancelled := cancelInSlowCall(t, r, sid, "go slow", kb, marker)
	t.Logf("cancel to run end: %s", time.Since(cancelled))
	sandboxtest.WaitFor(t, "the script's processes to go", 5*time.Second, func() bool { return len(sandboxtest.ProcessesWith(marker)) == 0 })
	calls := harnesstest.Payloads(t, f.env.Store, sid, events.KindMCPCall)
	if len(calls) != 1 || calls[0]["outcome"] != events.OutcomeUnknown {
		t.Fatalf("records right after the cancel %v; want the slow call as unknown", calls)
	}
	close(kb.slow)
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := cm.Wait(wctx); err != nil {
		t.Fatal("the slow call's outcome was never recorded:", err)
	}
	calls = harnesstest.Payloads(t, f.env.Store, sid, events.KindMCPCall)
	if len(calls) != 2 || calls[1]["outcome"] != events.OutcomeCompleted || calls[1]["late"] != true {
		t.Fatalf("records after the server answered %v; want a late completed record", calls)
	}
	evs, err := f.env.Store.Events(context.Background(), sid, 0)
	if err != nil {
		t.Fatal(err)
	}
	hist := runner.History(evs)
	var seen string
	for _, m := range hist {
		seen += m.Text + "\n"
	}
	if !strings.Contains(seen, "outcome unknown") || !strings.Contains(seen, "ended after its script did: completed") {
		t.Fatalf("the history does not carry the call's records:\n%s", seen)
	}
	mustRun(t, r, sid, "and now?")
}

// cancelInSlowCall runs a turn of prompt in session sid, whose script calls kb's slow
// tool and has started a child process with marker in its command line, and cancels it
// once both are under way; the run must end cancelled within 10s. It returns when the
// cancel was made.
func cancelInSlowCall(t *testing.T, r *runner.Runner, sid, prompt string, kb *kbServer, marker string) time.Time {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan runner.Outcome, 1)
	go func() {
		out, _ := r.Run(ctx, sid, prompt, nil)
		done <- out
	}()
	<-kb.slowEnter
	sandboxtest.WaitFor(t, "the script's child", 10*time.Second, func() bool { return len(sandboxtest.ProcessesWith(marker)) > 0 })
	cancelled := time.Now()
	cancel()
	select {
	case out := <-done:
		if out.Status != store.RunCancelled {
			t.Fatalf("run status %s; want cancelled", out.Status)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not end within 10s of the cancel")
	}
	return cancelled
}

func randMarker() string { return strconv.FormatInt(time.Now().UnixNano()%1e9, 10) }

// Each limit stops the script with the attribute that raises it named, and the
// session goes on; a call timeout is an error the script can catch.
func TestCodeModeLimits(t *testing.T) {
	f := newFixture(t)
	kb := newKB(t, "tok")
	cases := []struct {
		name, code string
		limits     map[string]any
		want       []string
		calls      int
	}{
		{"max_calls", "for i in range(10):\n    kb.population(city=str(i))\nprint('never')",
			map[string]any{"max_calls": 3}, []string{"stopped:", "more than 3 MCP calls", "code_mode_limits.max_calls"}, 4},
		{"call_timeout", "try:\n    kb.slow(city='x')\nexcept ToolError as e:\n    print('caught:', e)",
			map[string]any{"call_timeout_seconds": 1}, []string{"exit code 0", "caught:", "code_mode_limits.call_timeout_seconds"}, 1},
		{"run_timeout", "import time\ntime.sleep(30)\nprint('never')",
			map[string]any{"run_timeout_seconds": 1}, []string{"stopped:", "code_mode_limits.run_timeout_seconds"}, 0},
		// 9 bytes a result ("2100000" as JSON): the 114th passes the least bound the
		// provider (and so the harness) accepts.
		{"max_result_bytes", "for i in range(1000):\n    kb.population(city=str(i))\nprint('never')",
			map[string]any{"max_result_bytes": agentspec.MinCodeMaxResultBytes, "max_calls": 1000}, []string{"stopped:", "passed 1024 bytes", "code_mode_limits.max_result_bytes"}, 114},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, _ := f.codeAgent(t, "lim-"+strings.ReplaceAll(c.name, "_", "-"), kb, c.limits, harnesstest.Owner, nil,
				runCode(codemode.Python, c.code), text("after"))
			sid, _ := r.NewSession(context.Background(), harnesstest.Owner)
			mustRun(t, r, sid, "go")
			out := results(t, f.env.Store, sid)[0]["text"].(string)
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Fatalf("result %q lacks %q", out, w)
				}
			}
			if strings.Contains(out, "never") {
				t.Fatalf("the script went on past its limit: %q", out)
			}
			if got := len(harnesstest.Payloads(t, f.env.Store, sid, events.KindMCPCall)); got != c.calls {
				t.Fatalf("%d mcp_call records; want %d", got, c.calls)
			}
			if msgs := harnesstest.Payloads(t, f.env.Store, sid, events.KindModelMessage); msgs[len(msgs)-1]["text"] != "after" {
				t.Fatalf("the session did not go on: %v", msgs)
			}
		})
	}
}

// Listing Code Mode's tool and answering without code provision nothing.
func TestCodeModeQuestionProvisionsNoSandbox(t *testing.T) {
	f := newFixture(t)
	kb := newKB(t, "tok")
	r, _ := f.codeAgent(t, "coder", kb, nil, harnesstest.Owner, nil, text("42"))
	sid, _ := r.NewSession(context.Background(), harnesstest.Owner)
	mustRun(t, r, sid, "what is six times seven?")
	if n := f.env.Runtime.Total(); n != 0 {
		t.Fatalf("a turn without code made %d sandbox backend calls; want 0", n)
	}
}

// TypeScript runs where Node.js strips types (22.6 and newer); elsewhere the model is
// told clearly what is missing and what to do instead.
func TestCodeModeTypeScript(t *testing.T) {
	f := newFixture(t)
	kb := newKB(t, "tok")
	code := `const f: {city: string; temp_c: number} = await kb.forecast({city: "Kyiv"});
console.log("ts:", f.city);`
	r, _ := f.codeAgent(t, "coder", kb, nil, harnesstest.Owner, nil, runCode(codemode.TypeScript, code), text("done"))
	sid, _ := r.NewSession(context.Background(), harnesstest.Owner)
	mustRun(t, r, sid, "ts")
	out := results(t, f.env.Store, sid)[0]["text"].(string)
	v, err := osexec.Command("node", "-p", "process.versions.node").Output()
	if err != nil {
		t.Fatalf("node is needed by this test (the sandbox's platform image is the host's /usr): %v", err)
	}
	var major, minor int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(v)), "%d.%d", &major, &minor); err != nil {
		t.Fatalf("node -p process.versions.node: %q: %v", v, err)
	}
	if major > 22 || (major == 22 && minor >= 6) {
		if !strings.Contains(out, "ts: Kyiv") {
			t.Fatalf("node %s strips types, yet: %q", v, out)
		}
		return
	}
	if !strings.Contains(out, "needs Node.js 22.6 or newer") || !strings.Contains(out, "Write the script in JavaScript") ||
		!strings.Contains(out, "exit code 127") && !strings.Contains(out, "did not run") {
		t.Fatalf("node %s: the result does not say what is missing: %q", strings.TrimSpace(string(v)), out)
	}
}
