package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model/scripted"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// ErrNotOwner is returned when the caller does not own the agent: a check runs the
// agent's sandbox, and authority over it follows ownership.
var ErrNotOwner = errors.New("not the agent's owner")

// Config is what a check runs with.
type Config struct {
	Store     *store.Store
	Sandboxes *lifecycle.Manager
	// Caller runs the check and owns its session; it must own the agent, unless Operator.
	Caller string
	// Operator: the caller runs the harness for every owner, as a harness role on a shared
	// PostgreSQL control plane does (`trueforge-harness run` runs any team's agent there;
	// a team role cannot run the harness at all), so it may check any agent.
	Operator bool
	Logger   *slog.Logger
	// Progress, when set, is told as each step starts and ends.
	Progress func(msg string)
}

// Failure is one expectation that did not hold.
type Failure struct {
	Expectation string // the expect field, e.g. "exit_codes" or "output_matches[0]"
	Message     string
}

// StepResult is what one step did.
type StepResult struct {
	Name     string
	Duration time.Duration
	Failures []Failure
	// Skipped: an earlier step's message did not complete, so this one was not sent.
	Skipped bool
	// Output is the tail (OutputCap bytes) of the step's tool output.
	Output string
}

// Result is a check's outcome.
type Result struct {
	Check     string
	Agent     string
	SessionID string
	Duration  time.Duration
	Steps     []StepResult
}

// Passed reports whether every expectation held.
func (r Result) Passed() bool {
	for _, s := range r.Steps {
		if len(s.Failures) > 0 || s.Skipped {
			return false
		}
	}
	return true
}

// FirstFailure names the first failed step and expectation, as a sentence.
func (r Result) FirstFailure() string {
	for _, s := range r.Steps {
		if len(s.Failures) > 0 {
			return fmt.Sprintf("step %q: %s: %s", s.Name, s.Failures[0].Expectation, s.Failures[0].Message)
		}
	}
	return ""
}

// sandboxTools are the built-in tools that run in the session's sandbox.
var sandboxTools = []string{tools.NameExec, tools.NameReadFile, tools.NameWriteFile, tools.NameListFiles, tools.NameOfferArtifact, "extract_archive", "run_code"}

// Run plays check f against agent agentName in a new session of cfg.Caller; the
// session's sandbox is deleted when it ends. An error is a check that could not run
// (no such agent, not the caller's, its environment not ready); a check that ran
// returns its Result, passed or not.
func Run(ctx context.Context, cfg Config, agentName string, f *File) (Result, error) {
	res := Result{Check: f.Name, Agent: agentName}
	// Ownership first: another owner learns nothing of the agent's readiness.
	row, err := cfg.Store.GetAgent(ctx, agentName)
	if err == nil && row.Owner != cfg.Caller && !cfg.Operator {
		return res, fmt.Errorf("agent %q belongs to %q, and %q may not run a check of it: %w", agentName, row.Owner, cfg.Caller, ErrNotOwner)
	}
	a, err := agents.Load(ctx, cfg.Store, agentName)
	if err != nil {
		return res, err
	}
	maxTurns := int64(0)
	for _, s := range f.Steps {
		maxTurns = max(maxTurns, int64(len(s.Turns)))
	}
	r := &runner.Runner{Store: cfg.Store, Agent: a, Model: scripted.New(f.script()), Logger: cfg.Logger,
		Tools: &tools.Executor{Store: cfg.Store, Sandboxes: cfg.Sandboxes},
		// The script decides the turns; the agent's limits are for its real model.
		MaxTurns: maxTurns + 1, TokenBudget: 1 << 40}
	ctx, cancel := context.WithTimeout(ctx, f.timeout())
	defer cancel()
	start := time.Now()
	id, err := r.NewSession(ctx, cfg.Caller)
	if err != nil {
		return res, err
	}
	res.SessionID = id
	if cfg.Sandboxes != nil {
		defer func() {
			dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer dcancel()
			if err := cfg.Sandboxes.Delete(dctx, id); err != nil && cfg.Logger != nil {
				cfg.Logger.Warn("check: deleting the session's sandbox", "session", id, "err", err)
			}
		}()
	}
	usedSandbox := false
	for i, s := range f.Steps {
		if i > 0 && !res.Steps[i-1].completed() {
			res.Steps = append(res.Steps, StepResult{Name: s.Name, Skipped: true})
			continue
		}
		progress(cfg, fmt.Sprintf("step %d/%d %q", i+1, len(f.Steps), s.Name))
		sr := runStep(ctx, r, id, s, &usedSandbox)
		res.Steps = append(res.Steps, sr)
		verdict := "passed"
		if len(sr.Failures) > 0 {
			verdict = "failed: " + sr.Failures[0].Expectation + ": " + sr.Failures[0].Message
		}
		progress(cfg, fmt.Sprintf("step %d/%d %q %s", i+1, len(f.Steps), s.Name, verdict))
	}
	res.Duration = time.Since(start)
	return res, nil
}

func progress(cfg Config, msg string) {
	if cfg.Progress != nil {
		cfg.Progress(msg)
	}
}

// runFailure is the expectation a message that did not complete fails.
const runFailure = "message completed"

func (s StepResult) completed() bool {
	return !s.Skipped && !slices.ContainsFunc(s.Failures, func(f Failure) bool { return f.Expectation == runFailure })
}

// stepLog is what a step's events said.
type stepLog struct {
	calls     []string // tool call names
	exitCodes []int
	output    strings.Builder
	offered   []string
	sandbox   bool // a sandbox tool ran, or a sandbox was provisioned
	errors    []string
}

var exitLine = regexp.MustCompile(`(?m)^exit_code: (-?\d+)`)

func (l *stepLog) event(e runner.Event) {
	if e.Partial || e.Seq == 0 {
		return
	}
	switch e.Kind {
	case events.KindToolCall:
		var tc events.ToolCall
		if json.Unmarshal(e.Payload, &tc) == nil {
			l.calls = append(l.calls, tc.Name)
			if slices.Contains(sandboxTools, tc.Name) {
				l.sandbox = true
			}
		}
	case events.KindToolResult:
		var tr events.ToolResult
		if json.Unmarshal(e.Payload, &tr) != nil {
			return
		}
		if tr.Name == tools.NameExec {
			if m := exitLine.FindStringSubmatch(tr.Text); m != nil {
				n, _ := strconv.Atoi(m[1])
				l.exitCodes = append(l.exitCodes, n)
			} else {
				l.exitCodes = append(l.exitCodes, -1) // the command did not run: a refusal, a lost sandbox
			}
		}
		if tr.Artifact != nil {
			l.offered = append(l.offered, tr.Artifact.Path)
		}
		if tr.Provisioned {
			l.sandbox = true
		}
		fmt.Fprintf(&l.output, "[%s]\n%s\n", tr.Name, tr.Text)
	case events.KindSandboxProvisioned, events.KindSandboxResumed:
		l.sandbox = true
	case events.KindError:
		var er events.Error
		if json.Unmarshal(e.Payload, &er) == nil {
			l.errors = append(l.errors, er.Message)
		}
	}
}

func runStep(ctx context.Context, r *runner.Runner, sessionID string, s Step, usedSandbox *bool) StepResult {
	start := time.Now()
	var l stepLog
	out, err := r.RunMessage(ctx, runner.NewRunID(), sessionID, events.UserMessage{Text: s.Message}, l.event)
	sr := StepResult{Name: s.Name, Duration: time.Since(start), Output: tail(l.output.String(), OutputCap)}
	fail := func(exp, format string, a ...any) {
		sr.Failures = append(sr.Failures, Failure{Expectation: exp, Message: fmt.Sprintf(format, a...)})
	}
	switch {
	case ctx.Err() != nil:
		fail(runFailure, "the check's time ran out (timeout_seconds) during this step")
	case err != nil:
		fail(runFailure, "the message did not run: %v", err)
	case out.Status != store.RunCompleted:
		why := ""
		if len(l.errors) > 0 {
			why = ": " + strings.Join(l.errors, "; ")
		}
		fail(runFailure, "the message ended %s%s", out.Status, why)
	}
	e := s.Expect
	if e.ExitCodes != nil && !slices.Equal(e.ExitCodes, l.exitCodes) {
		fail("exit_codes", "want %v from the step's exec calls, got %v", e.ExitCodes, l.exitCodes)
	}
	text := l.output.String()
	for i, re := range e.matches {
		if !re.MatchString(text) {
			fail(fmt.Sprintf("output_matches[%d]", i), "%q matches nothing in the step's tool output", re.String())
		}
	}
	for i, re := range e.notMatches {
		if loc := re.FindStringIndex(text); loc != nil {
			fail(fmt.Sprintf("output_not_matches[%d]", i), "%q matches %q in the step's tool output", re.String(), text[loc[0]:loc[1]])
		}
	}
	for i, p := range e.FilesOffered {
		if !slices.Contains(l.offered, tools.CleanPath(p)) {
			fail(fmt.Sprintf("files_offered[%d]", i), "%s was not offered (offered: %v)", p, l.offered)
		}
	}
	if e.NoSandbox {
		if l.sandbox {
			fail("no_sandbox", "the step used a sandbox (tool calls: %v)", l.calls)
		} else if !*usedSandbox {
			if rec, err := r.Store.GetSessionSandbox(ctx, sessionID); err == nil {
				fail("no_sandbox", "the session has sandbox %s (%s) after a step that needed none", rec.SandboxID, rec.State)
			}
		}
	}
	*usedSandbox = *usedSandbox || l.sandbox
	return sr
}

// tail is the last n bytes of s, marked as cut when it is.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "[... " + strconv.Itoa(len(s)-n) + " bytes cut]\n" + strings.ToValidUTF8(s[len(s)-n:], "")
}
