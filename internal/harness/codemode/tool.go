// Package codemode runs Code Mode: the model writes a script (Python, JavaScript or
// TypeScript) that runs in the session's sandbox against a typed API of the agent's
// allowed MCP tools, and every call the script makes crosses back to the harness over
// the script's own stdin and stdout (the bridge), where the operator's policy decides
// it and the harness makes it with its own credentials, for the session's owner. The
// sandbox never holds an MCP token or any capability that outlives the script: the
// bridge is the script process's stdio. Only what the script prints reaches the model.
//
// Limits (agentspec.CodeModeLimits, per script, each with a default and the agent's
// code_mode_limits): a per-call timeout, a wall-clock limit for the whole script, a
// cap on the calls and one on the bytes of results the script receives (each result
// minimized to the fields its tool's output schema declares first). A script that
// passes one is stopped and the model is told which limit and which attribute raises
// it; the session goes on.
//
// Cancel: the script and its processes stop at once (the runtime kills them); MCP calls
// it had in flight are not cut off half-way: each is recorded at once as unknown, and
// again (late) with how it ended; the next turn's history carries that record.
package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// ToolName is Code Mode's tool.
const ToolName = "run_code"

// MaxCode is the largest script the tool accepts.
const MaxCode = 256 << 10

// MCP is what Code Mode needs of the agent's MCP toolset (mcptools.Toolset).
type MCP interface {
	Descriptors(ctx context.Context) []mcptools.Descriptor
	// Authorize runs the operator's gate for a call (policy, approval, budgets); the
	// Permit sends it.
	Authorize(ctx context.Context, o mcptools.Origin, name string, args map[string]any) (*mcptools.Permit, mcptools.Value, error)
}

// Mode is Code Mode's tool for one agent's runner (tools.CodeTool).
type Mode struct {
	mcp    MCP
	logger *slog.Logger

	mu    sync.Mutex
	names string // the tool names the API was built from
	cur   *API
	spec  model.ToolSpec

	// pending counts calls in flight, including those of scripts that ended.
	pending sync.WaitGroup
}

// New returns Code Mode over an agent's MCP toolset (nil: a script has no tools).
func New(mcp MCP, logger *slog.Logger) *Mode {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Mode{mcp: mcp, logger: logger}
}

// Wait waits until every MCP call that scripts started has ended (and been recorded),
// or ctx ends: a harness that exits after a cancel waits here, so a call still running
// is recorded rather than dropped.
func (m *Mode) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { m.pending.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// api is the script API as last built.
func (m *Mode) api() *API {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// Spec is the tool the model sees; its description carries the API. Listing it
// provisions nothing (the MCP servers are asked for their tools, never the sandbox).
func (m *Mode) Spec(ctx context.Context) model.ToolSpec {
	var descs []mcptools.Descriptor
	if m.mcp != nil {
		descs = m.mcp.Descriptors(ctx)
	}
	names := make([]string, len(descs))
	for i, d := range descs {
		names[i] = d.Name
	}
	key := strings.Join(names, "\n")
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur != nil && key == m.names {
		return m.spec
	}
	ts := make([]Tool, len(descs))
	for i, d := range descs {
		ts[i] = Tool{Name: d.Name, Server: d.Server, Tool: d.Tool, Description: d.Description, Input: d.Input, Output: d.Output}
	}
	m.names, m.cur = key, NewAPI(ts)
	m.spec = model.ToolSpec{Name: ToolName, Description: describe(m.cur), Parameters: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"language": map[string]any{"type": "string", "enum": slices.Clone(Languages), "description": "The script's language."},
			"code":     map[string]any{"type": "string", "description": "The script. Print what you want to see; only the output comes back."},
		},
		"required": []string{"language", "code"},
	}}
	return m.spec
}

func describe(api *API) string {
	return "Run a script in this session's sandbox that calls the agent's MCP tools as functions; only what it prints comes back to you. " +
		"Use it to combine several tool calls, filter or aggregate large results, or compute over them, instead of reading every result yourself. " +
		"Python: the tools are module-level objects (also `import tools`), called with keyword arguments: `r = weather.forecast(city=\"Paris\")`. " +
		"JavaScript/TypeScript: globals whose functions take one object and return a promise: `const r = await weather.forecast({city: \"Paris\"})` (top-level await works). " +
		"A refused or failed call raises ToolError. The script runs in /workspace with the sandbox's files and tools; calls go through the harness, which holds the credentials. " +
		"Limits per script (the agent's code_mode_limits): MCP calls, seconds per call, seconds in all, bytes of results.\n\nAPI:\n" + api.Describe(DescribeBudget)
}

// Args are the tool's arguments.
type Args struct {
	Language string `json:"language"`
	Code     string `json:"code"`
}

// Run runs a script in the call's sandbox (provisioning it if this is the session's
// first sandbox call) and returns its output, exit status and any limit it hit.
func (m *Mode) Run(ctx context.Context, x *tools.Executor, c tools.Call, raw json.RawMessage) tools.Result {
	var a Args
	if err := json.Unmarshal(raw, &a); err != nil {
		return tools.Result{Text: "run_code: the arguments must be an object {\"language\": ..., \"code\": ...}: " + err.Error(), IsError: true}
	}
	lang, err := language(a.Language)
	if err != nil {
		return tools.Result{Text: "run_code: " + err.Error(), IsError: true}
	}
	if strings.TrimSpace(a.Code) == "" {
		return tools.Result{Text: "run_code: code is empty; give the script", IsError: true}
	}
	if len(a.Code) > MaxCode {
		return tools.Result{Text: fmt.Sprintf("run_code: the script is %d bytes, more than %d; write a shorter one, or write it to a file with write_file and run it with exec", len(a.Code), MaxCode), IsError: true}
	}
	api := m.api()
	if api == nil {
		m.Spec(ctx)
		api = m.api()
	}
	if refusal, ok := x.ApproveCode(ctx, c, ToolName, lang, a.Code); !ok {
		return refusal
	}
	stubs := api.Python()
	if lang != Python {
		stubs = api.JavaScript()
	}
	first, _ := json.Marshal(map[string]string{"code": a.Code, "api": stubs})
	return x.InSandbox(ctx, c, func(l *lifecycle.Lease, _ *tools.Result) (string, bool, bool) {
		return m.runScript(ctx, x.Store, l, c, lang, append(first, '\n'))
	})
}

// storeRecorder appends bridge records to the session's log.
type storeRecorder struct {
	st        *store.Store
	sessionID string
	runID     string
	logger    *slog.Logger
}

func (r storeRecorder) record(ctx context.Context, p events.MCPCall) {
	if _, err := events.Append(context.WithoutCancel(ctx), r.st, r.sessionID, r.runID, p); err != nil {
		r.logger.Warn("recording an MCP call of a script", "session", r.sessionID, "tool", p.Tool, "err", err)
	}
}

func (m *Mode) runScript(ctx context.Context, st *store.Store, l *lifecycle.Lease, c tools.Call, lang string, first []byte) (string, bool, bool) {
	lim := c.Agent.Spec.CodeLimits
	execCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	inR, inW := io.Pipe()
	s := &script{
		m: m, ctx: ctx, call: c, toolID: c.ToolCallID, lim: lim, stop: stop, stdin: inW,
		st:      storeRecorder{st: st, sessionID: c.SessionID, runID: c.RunID, logger: m.logger},
		flights: map[int]*flight{}, sem: make(chan struct{}, maxConcurrent), output: sandbox.NewOutputBuffer(outputCap),
	}
	s.clock = newRunClock(time.Duration(lim.RunTimeoutSeconds)*time.Second, func() {
		stop(limitError{fmt.Sprintf("the script ran for %ds (code_mode_limits.run_timeout_seconds)", lim.RunTimeoutSeconds)})
	})
	defer s.clock.halt()
	go func() {
		s.wmu.Lock()
		defer s.wmu.Unlock()
		_, _ = inW.Write(first)
	}()
	out := &lines{fn: s.handle, over: func() {
		stop(limitError{fmt.Sprintf("the script sent a bridge message over %d bytes (a call's arguments); it was stopped", maxFrame)})
	}}
	errOut := writerFunc(func(p []byte) (int, error) {
		_, _ = s.output.Write(p)
		if c.Output != nil {
			c.Output("stdout", p)
		}
		return len(p), nil
	})
	res, err := l.Runtime.Exec(execCtx, l.Record.SandboxID, sandbox.ExecRequest{
		Argv: command(lang), Stdin: inR, Stdout: out, Stderr: errOut, Interactive: true,
		// The run clock above enforces the script's limit without the time its calls
		// wait for approvals; the runtime's own timeout is the backstop past that.
		Timeout: time.Duration(lim.RunTimeoutSeconds)*time.Second + MaxApprovalWait, OutputCap: 64 << 10,
	})
	_ = inW.CloseWithError(io.ErrClosedPipe)
	cause := context.Cause(execCtx)
	var limit limitError
	stoppedByLimit := errors.As(cause, &limit)
	why := "ended"
	switch {
	case ctx.Err() != nil:
		why = "was cancelled"
	case stoppedByLimit:
		why = "was stopped by a limit"
	case res.TimedOut:
		why = "ran out of time"
	}
	abandoned := s.abandon(why)
	text, _ := s.output.Bytes()
	var b strings.Builder
	switch {
	case ctx.Err() != nil:
		b.WriteString("cancelled: the script was stopped")
	case stoppedByLimit:
		b.WriteString("stopped: " + limit.msg)
	case res.TimedOut:
		fmt.Fprintf(&b, "stopped: the script ran for %ds (code_mode_limits.run_timeout_seconds)", lim.RunTimeoutSeconds)
	case err != nil:
		b.WriteString("the script could not run: " + err.Error())
	case res.ExitCode == MissingInterpreter:
		fmt.Fprintf(&b, "the script did not run (exit code %d)", res.ExitCode)
	default:
		fmt.Fprintf(&b, "exit code %d", res.ExitCode)
		if res.Limit != "" {
			fmt.Fprintf(&b, " (the sandbox's %s limit)", res.Limit)
		}
	}
	if len(abandoned) > 0 {
		fmt.Fprintf(&b, "\nMCP calls still running when the script ended, each recorded in the session's log as unknown until it ends: %s", strings.Join(abandoned, ", "))
	}
	if len(text) > 0 {
		b.WriteString("\n")
		b.Write(text)
	}
	isErr := ctx.Err() != nil || stoppedByLimit || res.TimedOut || err != nil || res.ExitCode != 0
	return b.String(), isErr, err != nil && ctx.Err() == nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
