// Package tools is what the model may call: exec, read_file, write_file, list_files,
// offer_artifact, load_skill (skills.go) and extract_archive (extract.go) in the
// session's sandbox, and read_output to page through a result that was cut. The tool
// list depends only on the agent's spec, never on live sandbox state, so building a
// prompt provisions nothing; the sandbox is acquired inside the first call that needs
// one.
//
// Each built-in tool is one entry of a table (builtins): its name, its description, an
// argument struct from whose json and jsonschema tags the schema the model sees is
// derived, and a handler that gets the decoded arguments. Arguments that do not fit
// (not an object, a required field missing, a value of the wrong type) are answered
// with an error naming the field and what it must be, before any sandbox is acquired.
//
// Every result passes Truncate (DefaultLimit, head and tail) before it reaches the model
// or the event log; the full text of a cut result is kept in the store (tool_outputs)
// and read_output serves it.
//
// Defaults: exec timeout 120 s (timeout_seconds up to 1800), retained output 1 MiB per
// stream, read_file 256 KiB unless max_bytes says otherwise (up to 16 MiB), artifacts
// up to 16 MiB, classified "untrusted" and offered for 168 hours unless the call says
// otherwise.
package tools

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/filetype"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Defaults and caps (see the package doc).
const (
	DefaultExecTimeout   = 120 * time.Second
	MaxExecTimeout       = 30 * time.Minute
	DefaultReadBytes     = 256 << 10
	MaxReadBytes         = 16 << 20
	MaxArtifactBytes     = 16 << 20
	DefaultArtifactTTL   = 168 * time.Hour
	DefaultClassfication = "untrusted"
)

// Classifications an artifact may carry: the operator's policy decides who may
// download each (policy.DownloadRecipients), so the list is the policy's.
var Classifications = policy.Classifications

// Executor runs tool calls.
type Executor struct {
	Store     *store.Store
	Sandboxes *lifecycle.Manager // nil when no agent of this harness has a sandbox
	// MCP, when set, serves the agent's MCP tools (mcptools.Toolset); their results pass
	// the same truncation point, and they never touch the sandbox.
	MCP MCPTools
	// Code, when set, is Code Mode's tool (codemode): the model reaches the agent's MCP
	// tools through the scripts it runs in the sandbox, so they are not offered directly.
	Code  CodeTool
	Limit int              // bytes of a result shown to the model; 0 means DefaultLimit
	Now   func() time.Time // nil means time.Now
	// Budgets charges the sandbox time of calls to the operator's cumulative budgets
	// (budgets.Meter); nil charges none.
	Budgets SandboxBudgets
	// Approvals holds code for the session's user when the agent's
	// sandbox.approve_code says so; nil refuses such code.
	Approvals CodeApprovals
	// Attachments writes the session's attachments into its sandbox when a call has
	// acquired it (attachments.Service); nil writes none.
	Attachments Attachments
	// Scans, when set, scans an offered file for malware as it is offered
	// (sessions.OfferScans), so the user sees the verdict before the first download; nil
	// leaves the scan to that download.
	Scans OfferScanner
}

// OfferScanner scans an artifact as it is offered and returns a sentence for the model
// ("" when the file is clean or was not scanned).
type OfferScanner interface {
	ScanOffered(ctx context.Context, a store.Artifact) string
}

// Attachments writes a session's attachments into the sandbox of lease l that it does
// not have yet, returning a note for the model on each.
type Attachments interface {
	WriteInto(ctx context.Context, sessionID string, l *lifecycle.Lease) []string
}

// SandboxBudgets is the operator's cumulative sandbox-time budgets: a sandbox call is
// refused once one is spent, and the time each call holds the sandbox (provisioning or
// resuming it, and running) is charged after it.
type SandboxBudgets interface {
	AdmitSandbox(ctx context.Context, s policy.Subject) error
	SpendSandbox(ctx context.Context, s policy.Subject, d time.Duration)
}

// MCPTools is what the executor needs from an MCP toolset.
type MCPTools interface {
	Specs(ctx context.Context) []model.ToolSpec
	Has(name string) bool
	Call(ctx context.Context, o mcptools.Origin, name string, args json.RawMessage) (string, bool)
}

// CodeTool is what the executor needs from Code Mode: one tool, whose description
// carries the script API (listing it provisions nothing), run in the call's sandbox.
type CodeTool interface {
	Spec(ctx context.Context) model.ToolSpec
	Run(ctx context.Context, x *Executor, c Call, args json.RawMessage) Result
}

// AllSpecs is the tool list of a run: the agent's built-in tools and its MCP tools
// (through Code Mode's tool when it is on). None depends on sandbox state.
func (x *Executor) AllSpecs(ctx context.Context, a *agents.Agent) []model.ToolSpec {
	specs := Specs(a)
	switch {
	case x.Code != nil:
		specs = append(specs, x.Code.Spec(ctx))
	case x.MCP != nil:
		specs = append(specs, x.MCP.Specs(ctx)...)
	}
	return specs
}

// Call is one tool call in its session.
type Call struct {
	SessionID string
	// RunID is the run making the call; User the session's owner, on whose behalf
	// the harness calls MCP servers.
	RunID string
	User  string
	// ToolCallID is the model's id of this call.
	ToolCallID string
	Agent      *agents.Agent
	// Event is the seq of the tool_call event: an artifact's source event.
	Event int64
	// Commands returns the exec commands run in the session's current sandbox, for
	// an artifact's lineage.
	Commands func() []string
	// Output, when set, receives exec output as it streams ("stdout"/"stderr").
	Output func(stream string, p []byte)
	// Appended, when set, streams what the call appended to the session's log
	// itself (an approval it waits for), without waiting for the call to end.
	Appended func()
}

// Origin is the session, turn and model call that an MCP call made for c comes from.
// A server's progress on the call streams to the user as the call's "progress" output.
func (c Call) Origin() mcptools.Origin {
	o := mcptools.Origin{SessionID: c.SessionID, RunID: c.RunID, ToolCallID: c.ToolCallID, Appended: c.Appended}
	if c.Output != nil {
		o.Progress = func(text string) { c.Output("progress", []byte(text)) }
	}
	return o
}

// subject is who the call's spending is charged to.
func (c Call) subject() policy.Subject {
	s := policy.Subject{User: c.User, Session: c.SessionID, Turn: c.RunID}
	if c.Agent != nil {
		s.Owner, s.Agent = c.Agent.Owner, c.Agent.Name
	}
	return s
}

// Result is what a call returns to the model.
type Result struct {
	Text      string // what the model sees (already truncated)
	IsError   bool
	Truncated bool
	FullSize  int
	// Provisioned: the call created the session's sandbox.
	Provisioned bool
	// Artifact is set by offer_artifact.
	Artifact *store.Artifact
}

// Tool names.
const (
	NameReadOutput    = "read_output"
	NameExec          = "exec"
	NameReadFile      = "read_file"
	NameWriteFile     = "write_file"
	NameListFiles     = "list_files"
	NameOfferArtifact = "offer_artifact"
)

// The argument types of the built-in tools: the JSON schema each tool's model sees is
// derived from them (define): the json name is the property, the jsonschema tag its
// description, and a field without omitempty is required.
type (
	ReadOutputArgs struct {
		CallID string `json:"call_id" jsonschema:"The id of the tool call."`
		Offset int    `json:"offset,omitempty" jsonschema:"Byte offset to start at."`
		Length int    `json:"length,omitempty" jsonschema:"Bytes to read (at most 16384)."`
	}
	ExecArgs struct {
		Command        string `json:"command" jsonschema:"The shell command."`
		TimeoutSeconds int64  `json:"timeout_seconds,omitempty" jsonschema:"Wall-clock limit, default 120, at most 1800."`
		Cwd            string `json:"cwd,omitempty" jsonschema:"Working directory, default /workspace."`
	}
	ReadFileArgs struct {
		Path     string `json:"path" jsonschema:"Path relative to /workspace."`
		MaxBytes int64  `json:"max_bytes,omitempty" jsonschema:"Largest size to read, default 262144."`
	}
	WriteFileArgs struct {
		Path    string `json:"path" jsonschema:"Path relative to /workspace."`
		Content string `json:"content" jsonschema:"The file's content."`
	}
	ListFilesArgs struct {
		Dir string `json:"dir,omitempty" jsonschema:"Directory relative to /workspace, default the workspace."`
	}
	OfferArtifactArgs struct {
		Path           string `json:"path" jsonschema:"Path relative to /workspace."`
		Classification string `json:"classification,omitempty" jsonschema:"One of untrusted (default), internal, confidential, restricted, public. The operator's policy says who may download each: by default confidential only the session's owner, and restricted nobody until an admin releases it (data that must not leave without review)."`
		ExpiresInHours int64  `json:"expires_in_hours,omitempty" jsonschema:"How long the download is offered, default 168."`
	}
)

// builtins is every built-in tool, in the order the model is offered them. The table is
// made on first use: deriving the schemas takes most of a millisecond, which every start
// of a program linking this package would pay (the local sandbox's init is one, started
// for each sandbox).
var builtins = sync.OnceValue(func() []tool {
	return []tool{
		define(NameReadOutput, "Read part of the full output of an earlier tool call whose result was cut.", always, readOutput),
		define(NameExec, "Run a shell command (/bin/sh -c) in this session's sandbox, in /workspace. Files persist across turns of the session.",
			withSandboxOn, execTool),
		define(NameReadFile, "Read a file of the sandbox workspace.", withSandboxOn, readFile),
		define(NameWriteFile, "Write a file in the sandbox workspace, creating directories.", withSandboxOn, writeFile),
		define(NameListFiles, "List a directory of the sandbox workspace.", withSandboxOn, listFiles),
		define(NameOfferArtifact, "Offer a workspace file to the user for download.", withDownloads, offerArtifact),
		loadSkillTool(),      // skills.go
		extractArchiveTool(), // extract.go
	}
})

func always(*agents.Agent) bool { return true }

func withSandboxOn(a *agents.Agent) bool { return a != nil && a.Spec.Sandbox.Enabled }

func withDownloads(a *agents.Agent) bool { return withSandboxOn(a) && a.Spec.Sandbox.FileDownloads }

// Specs lists the tools offered to the agent's model. It depends on the spec only.
func Specs(a *agents.Agent) []model.ToolSpec {
	var specs []model.ToolSpec
	table := builtins()
	for i := range table {
		if table[i].offered(a) {
			spec := table[i].spec()
			if d := table[i].describe; d != nil {
				spec.Description = d(a)
			}
			specs = append(specs, spec)
		}
	}
	return specs
}

func (x *Executor) now() time.Time {
	if x.Now != nil {
		return x.Now()
	}
	return time.Now()
}

// Run executes one call and returns its (truncated) result. It never returns an error:
// failures are results the model sees, so the session goes on.
func (x *Executor) Run(ctx context.Context, c Call, tc model.ToolCall) Result {
	res := x.dispatch(ctx, c, tc)
	full := res.Text
	out, cut := Truncate(full, x.Limit, tc.ID)
	if cut {
		if err := x.Store.PutToolOutput(context.WithoutCancel(ctx), c.SessionID, tc.ID, []byte(full)); err != nil {
			out += "\n[the full output could not be kept: " + err.Error() + "]"
		}
	}
	res.Text, res.Truncated, res.FullSize = out, cut, len(full)
	return res
}

func (x *Executor) dispatch(ctx context.Context, c Call, tc model.ToolCall) Result {
	if x.Code != nil && tc.Name == x.Code.Spec(ctx).Name {
		return x.Code.Run(ctx, x, c, tc.Arguments)
	}
	if x.Code == nil && x.MCP != nil && x.MCP.Has(tc.Name) {
		text, isErr := x.MCP.Call(ctx, c.Origin(), tc.Name, tc.Arguments)
		return Result{Text: text, IsError: isErr}
	}
	table := builtins()
	i := slices.IndexFunc(table, func(t tool) bool { return t.name == tc.Name })
	if i < 0 || !table[i].offered(c.Agent) {
		return failed(fmt.Sprintf("unknown tool %q", tc.Name))
	}
	// Arguments are checked before a sandbox is acquired (withSandbox): a malformed call
	// provisions nothing.
	return table[i].run(ctx, invocation{x: x, c: c}, tc.Arguments)
}

func readOutput(ctx context.Context, in invocation, args ReadOutputArgs) Result {
	full, err := in.x.Store.GetToolOutput(ctx, in.c.SessionID, args.CallID)
	if err != nil {
		return failed(fmt.Sprintf("no kept output for call_id %q: only results that were cut are kept", args.CallID))
	}
	limit := in.x.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	if args.Length <= 0 || args.Length > limit-256 {
		args.Length = limit - 256
	}
	if args.Offset < 0 || args.Offset > len(full) {
		return failed(fmt.Sprintf("offset %d is outside the output (0..%d)", args.Offset, len(full)))
	}
	// A page never splits a character: both ends move back to a character start
	// (runeBoundary), so the next page, asked from this one's end, starts where it
	// ended; a page shorter than its one character is stretched to hold it.
	offset := runeBoundary(full, args.Offset)
	end := min(len(full), offset+args.Length)
	if b := runeBoundary(full, end); b > offset {
		end = b
	} else {
		for end < len(full) && runeBoundary(full, end) != end {
			end++
		}
	}
	return Result{Text: fmt.Sprintf("[bytes %d..%d of %d]\n%s", offset, end, len(full), full[offset:end])}
}

func execTool(ctx context.Context, in invocation, args ExecArgs) Result {
	if strings.TrimSpace(args.Command) == "" {
		return failed("exec: command is empty; give a shell command")
	}
	timeout := DefaultExecTimeout
	if args.TimeoutSeconds > 0 {
		timeout = min(time.Duration(args.TimeoutSeconds)*time.Second, MaxExecTimeout)
	}
	if refusal, ok := in.x.ApproveCode(ctx, in.c, "exec", "shell", args.Command); !ok {
		return refusal
	}
	return in.withSandbox(ctx, []string{"(files written by: " + args.Command + ")"}, func(l *lifecycle.Lease, _ *Result) (string, bool, bool) {
		req := sandbox.ExecRequest{Shell: args.Command, Cwd: args.Cwd, Timeout: timeout}
		if in.c.Output != nil {
			req.Stdout = streamWriter{"stdout", in.c.Output}
			req.Stderr = streamWriter{"stderr", in.c.Output}
		}
		res, err := l.Runtime.Exec(ctx, l.Record.SandboxID, req)
		if ctx.Err() != nil {
			return "cancelled: the command was stopped", true, false
		}
		if err != nil {
			return "exec failed: " + err.Error(), true, true
		}
		if res.ExitCode == -1 && !res.TimedOut && res.Limit == "" {
			return formatExec(res) + "\nthe command was killed", true, true
		}
		return formatExec(res), res.ExitCode != 0, false
	})
}

func readFile(ctx context.Context, in invocation, args ReadFileArgs) Result {
	if args.MaxBytes <= 0 {
		args.MaxBytes = DefaultReadBytes
	}
	args.MaxBytes = min(args.MaxBytes, MaxReadBytes)
	return in.withSandbox(ctx, nil, func(l *lifecycle.Lease, _ *Result) (string, bool, bool) {
		b, err := l.Runtime.ReadFile(ctx, l.Record.SandboxID, args.Path, args.MaxBytes)
		if err != nil {
			return "read_file: " + err.Error(), true, isLoss(err)
		}
		return string(b), false, false
	})
}

func writeFile(ctx context.Context, in invocation, args WriteFileArgs) Result {
	if args.Path == "" {
		return failed("write_file: path is empty")
	}
	return in.withSandbox(ctx, []string{args.Path}, func(l *lifecycle.Lease, _ *Result) (string, bool, bool) {
		if err := l.Runtime.WriteFile(ctx, l.Record.SandboxID, args.Path, strings.NewReader(args.Content), 0o644); err != nil {
			return "write_file: " + err.Error(), true, isLoss(err)
		}
		return fmt.Sprintf("wrote %d bytes to %s", len(args.Content), args.Path), false, false
	})
}

func offerArtifact(ctx context.Context, in invocation, args OfferArtifactArgs) Result {
	if args.Classification == "" {
		args.Classification = DefaultClassfication
	}
	if !slices.Contains(Classifications, args.Classification) {
		return failed(fmt.Sprintf("offer_artifact: classification %q is not one of %s", args.Classification, strings.Join(Classifications, ", ")))
	}
	ttl := DefaultArtifactTTL
	if args.ExpiresInHours > 0 {
		ttl = time.Duration(args.ExpiresInHours) * time.Hour
	}
	return in.withSandbox(ctx, nil, func(l *lifecycle.Lease, r *Result) (string, bool, bool) {
		b, err := l.Runtime.ReadFile(ctx, l.Record.SandboxID, args.Path, MaxArtifactBytes)
		if err != nil {
			return "offer_artifact: " + err.Error(), true, isLoss(err)
		}
		sum := sha256.Sum256(b)
		now := in.x.now()
		var ran []string
		if in.c.Commands != nil {
			ran = in.c.Commands()
		}
		cmds := boundCommands(ran) // lineage.go: the model's commands, bounded
		a := store.Artifact{
			ID: newID(), SessionID: in.c.SessionID, Path: CleanPath(args.Path), SHA256: hex.EncodeToString(sum[:]), Size: int64(len(b)),
			SourceEvent: in.c.Event, Classification: args.Classification, ExpiresAt: now.Add(ttl), SnapshotID: l.Record.SnapshotID,
			SandboxID: l.Record.SandboxID, Commands: cmds, Content: b, CreatedAt: now,
			DetectedType: filetype.Sniff(b), // so lists say what it is without reading it
		}
		// The archives the file came from, when it was extracted (extract_provenance.go).
		a.Provenance = in.provenance(ctx, a.Path)
		a.ManifestDigest, a.SessionInstalls = in.sessionLineage(ctx, l, len(ran)) // lineage.go
		if err := in.x.Store.PutArtifact(ctx, a); err != nil {
			return "offer_artifact: " + err.Error(), true, false
		}
		scanned := ""
		if sc := in.x.Scans; sc != nil {
			scanned = sc.ScanOffered(ctx, a)
		}
		a.Content = nil
		r.Artifact = &a
		text := fmt.Sprintf("offered %s for download: %d bytes, sha256 %s, classified %s, until %s (snapshot %s)",
			showName(a.Path), a.Size, a.SHA256, a.Classification, a.ExpiresAt.UTC().Format(time.RFC3339), a.SnapshotID)
		if scanned != "" {
			return text + "\n" + scanned, true, false
		}
		return text, false, false
	})
}

// withSandbox acquires the session's sandbox for fn, prefixes the lifecycle notes, and
// turns a sandbox that died under fn into a model-visible error (the session goes on).
// fn returns the text, whether it is an error, and whether the failure may be the
// sandbox's own death; it may fill in the result's other fields.
func (in invocation) withSandbox(ctx context.Context, writing []string, fn func(*lifecycle.Lease, *Result) (string, bool, bool)) Result {
	m := in.x.Sandboxes
	if m == nil {
		return failed("this harness has no sandbox manager")
	}
	subj, start := in.c.subject(), in.x.now()
	if b := in.x.Budgets; b != nil {
		if err := b.AdmitSandbox(ctx, subj); err != nil {
			return failed("not run: " + err.Error())
		}
	}
	l, err := m.Acquire(ctx, in.c.SessionID, in.c.Agent)
	if err != nil {
		return failed("the sandbox is not available: " + err.Error())
	}
	defer l.Release(ctx)
	if b := in.x.Budgets; b != nil {
		// Charged only for a sandbox the call got: from the acquire (provisioning or
		// resuming it) to the call's end.
		defer func() { b.SpendSandbox(ctx, subj, in.x.now().Sub(start)) }()
	}
	if w := in.x.Attachments; w != nil {
		l.Notes = append(l.Notes, w.WriteInto(ctx, in.c.SessionID, l)...)
	}
	r := Result{Provisioned: l.Provisioned}
	text, isErr, maybeLost := fn(l, &r)
	if maybeLost && ctx.Err() == nil && m.CheckLost(ctx, l, writing, text) {
		text = "the sandbox died during this call (" + strings.TrimSpace(text) + "). The conversation is intact; the next sandbox call recovers the sandbox or, if it is gone, creates a fresh one (the workspace is then reset)."
		if len(writing) > 0 {
			text += fmt.Sprintf(" Files this call was writing are uncertain: %v.", writing)
		}
		isErr = true
	}
	if len(l.Notes) > 0 {
		text = "[sandbox] " + strings.Join(l.Notes, "\n[sandbox] ") + "\n" + text
	}
	r.Text, r.IsError = text, isErr
	return r
}

func isLoss(err error) bool {
	return errors.Is(err, sandbox.ErrLost) || errors.Is(err, sandbox.ErrNotFound) || errors.Is(err, sandbox.ErrStopped)
}

func formatExec(res sandbox.ExecResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit_code: %d", res.ExitCode)
	if res.TimedOut {
		b.WriteString(" (timed out)")
	}
	if res.Limit != "" {
		fmt.Fprintf(&b, " (hit the %s limit)", res.Limit)
	}
	if res.Truncated {
		b.WriteString(" (the sandbox kept only the head and tail of the output)")
	}
	b.WriteString("\n")
	if len(res.Stdout) > 0 {
		b.WriteString("stdout:\n")
		b.Write(res.Stdout)
		if res.Stdout[len(res.Stdout)-1] != '\n' {
			b.WriteString("\n")
		}
	}
	if len(res.Stderr) > 0 {
		b.WriteString("stderr:\n")
		b.Write(res.Stderr)
	}
	return strings.TrimRight(b.String(), "\n")
}

type streamWriter struct {
	name string
	fn   func(string, []byte)
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.fn(w.name, append([]byte(nil), p...))
	return len(p), nil
}

var _ io.Writer = streamWriter{}

// CleanPath is the workspace-relative, slash-separated form of a path a model or a user
// gave ("./out.txt", "/workspace/out.txt" and "out.txt" are one file): artifacts are
// recorded under it, so every lookup must use it too.
func CleanPath(p string) string {
	p = strings.TrimPrefix(p, "/workspace/")
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
