// Package runner is the agent loop: a user message, then model step -> tool calls ->
// results -> next step, until the model answers without calls, the agent's max turns
// or token budget is reached, or the caller cancels.
//
// Everything said is committed to the session's append-only event log before the loop
// moves on (the user message before the first model call, each tool result before the
// next step); partial text and command output are streamed to the caller only. A run
// row with the process as owner and a heartbeat (DefaultHeartbeatEvery, 10 s) marks the
// session busy; on the next run, or on a `serve` replica's next pass (RepairStale), a
// run whose owner died (or whose heartbeat is older than StaleAfter,
// DefaultHeartbeatTimeout, 2 min, for an owner in another pid space: another machine or
// container) is marked interrupted and every tool call left without a result gets an
// error result, so a killed harness loses nothing already said and the history stays
// valid for every model API.
package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/periodic"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/telemetry"
)

// ErrBusy is returned when another live run (in another harness process or in this one)
// is running the session.
var ErrBusy = errors.New("session is busy")

// liveRuns holds the ids of the runs executing in this process. A run row names its
// process (lifecycle.ProcessOwner), not the call running it, so a row of this process is
// stale only when no Run here is executing it: a second Run of a session in this process
// must be told the session is busy, not end the first as if its harness had died. It is
// process-wide for the same reason the owner name is.
var liveRuns sync.Map

// Event is what a Run streams: committed log entries (Seq > 0; Kind and Payload as
// stored, read with events.Decode) and partial deltas (Partial: model text as it
// streams, command output), which are never stored.
type Event struct {
	Seq     int64
	Kind    string
	Payload json.RawMessage
	// Encoded: Payload is this harness's own encoding of the event (events.Encode),
	// in today's shape, so a reader may pass it on as it is; otherwise (an event
	// another writer appended, read back from the store) it may be in an older
	// harness's shape, which events.Decode reads.
	Encoded bool
	// Value is the event itself when Encoded (nil otherwise), so that a reader that
	// wants its fields (the API's metrics) need not decode Payload again.
	Value   events.Payload
	Partial bool
	Stream  string // for partial events: "text", "stdout" or "stderr"
	Delta   string
}

// Outcome sums up a run.
type Outcome struct {
	RunID        string
	Status       string // a store.Run* status
	Text         string // the last model text
	Steps        int
	InputTokens  int64
	OutputTokens int64
}

// Runner runs one agent's sessions.
type Runner struct {
	Store  *store.Store
	Agent  *agents.Agent
	Model  model.Model
	Tools  *tools.Executor
	Logger *slog.Logger
	// Owner names this process (lifecycle.ProcessOwner when "").
	Owner string
	// MaxTurns and TokenBudget override the agent's when > 0.
	MaxTurns    int64
	TokenBudget int64
	// Budgets charges the model's tokens to the operator's cumulative budgets (across
	// turns, sessions and replicas); nil charges none.
	Budgets TokenBudgets
	// HeartbeatEvery defaults to DefaultHeartbeatEvery, StaleAfter (the heartbeat
	// timeout) to DefaultHeartbeatTimeout.
	HeartbeatEvery time.Duration
	StaleAfter     time.Duration
	// Telemetry traces each turn (trace.go); nil or off traces nothing.
	Telemetry *telemetry.Provider

	ownerOnce sync.Once
	ownerName string
}

// TokenBudgets is the operator's cumulative token budgets (budgets.Meter): a model
// step is refused once one is spent, and each step's tokens are charged after it.
type TokenBudgets interface {
	AdmitTokens(ctx context.Context, s policy.Subject) error
	SpendTokens(ctx context.Context, s policy.Subject, tokens int64)
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}

// owner is this process's name in run rows; a Runner may run many sessions at once.
func (r *Runner) owner() string {
	r.ownerOnce.Do(func() {
		r.ownerName = r.Owner
		if r.ownerName == "" {
			r.ownerName = lifecycle.ProcessOwner()
		}
	})
	return r.ownerName
}

// NewSession creates a session of the runner's agent for user and returns its id. The
// session is user's: only they may read, continue or delete it, and its sandbox is
// labelled with their name. The agent's owner is whoever published the agent, not the
// people who talk to it.
func (r *Runner) NewSession(ctx context.Context, user string) (string, error) {
	if user == "" {
		return "", errors.New("a session needs an owner: pass --owner or set TRUEFORGE_OWNER")
	}
	id := "s-" + randHex(8)
	err := r.Store.CreateSession(ctx, store.Session{ID: id, Agent: r.Agent.Name, Owner: user, Replay: r.Agent.IsReplay()})
	return id, err
}

// System is the system prompt: the agent's instructions and a fixed description of the
// sandbox. It never mentions live sandbox state, so building it provisions nothing.
func (r *Runner) System() string {
	s := r.Agent.Spec.Instructions
	if r.Agent.Spec.Sandbox.Enabled {
		s += "\n\nYou have a sandbox for code, files and shell commands (tools exec, read_file, write_file, list_files). " +
			"It is created the first time you use one of those tools and keeps its files for the rest of this session. " +
			"Answer questions that need no code without it."
	}
	return s
}

// run is the state of one Run.
type run struct {
	r         *Runner
	sessionID string
	runID     string
	user      string // the session's owner
	emit      func(Event)
	// seqMu guards lastSeq and dirty: a tool call may stream what others appended
	// (sync) from the goroutines of its Code Mode calls while the run waits for it.
	seqMu   sync.Mutex
	lastSeq int64
	msgs    []model.Message
	emitMu  sync.Mutex
	// dirty: a tool ran since the last sync, so others (the sandbox manager) may have
	// appended events this run has not streamed yet.
	dirty bool
	// root is the turn's span, nil when tracing is off; tool (guarded by seqMu) the
	// running tool call's (trace.go).
	root trace.Span
	tool trace.Span
}

func (x *run) send(e Event) {
	if x.emit == nil {
		return
	}
	x.emitMu.Lock()
	defer x.emitMu.Unlock()
	x.emit(e)
}

// commit writes b with evs in one transaction and streams them, after any events
// others (the sandbox manager) appended since the last sync.
func (x *run) commit(ctx context.Context, b store.Batch, evs ...events.Payload) ([]int64, error) {
	ctx = context.WithoutCancel(ctx)
	x.seqMu.Lock()
	if x.dirty {
		x.syncLocked(ctx)
	}
	x.seqMu.Unlock()
	b.SessionID, b.RunID = x.sessionID, x.runID
	raws := make([][]byte, len(evs))
	for i, e := range evs {
		raw, err := events.Encode(e)
		if err != nil {
			return nil, err
		}
		raws[i] = raw
		b.Events = append(b.Events, store.EventInput{Kind: e.Kind(), Payload: raw})
	}
	seqs, err := x.r.Store.Commit(ctx, b)
	if err != nil {
		return nil, err
	}
	x.seqMu.Lock()
	defer x.seqMu.Unlock()
	if len(seqs) > 0 && seqs[0] == x.lastSeq+1 {
		for i, seq := range seqs {
			x.send(Event{Seq: seq, Kind: evs[i].Kind(), Payload: raws[i], Encoded: true, Value: evs[i]})
		}
		x.lastSeq = seqs[len(seqs)-1]
	} else if len(seqs) > 0 {
		x.syncLocked(ctx)
	}
	return seqs, nil
}

// append commits one event.
func (x *run) append(ctx context.Context, p events.Payload) (int64, error) {
	seqs, err := x.commit(ctx, store.Batch{}, p)
	if err != nil {
		return 0, err
	}
	return seqs[0], nil
}

// sync streams committed events this run did not write itself.
func (x *run) sync(ctx context.Context) {
	x.seqMu.Lock()
	defer x.seqMu.Unlock()
	x.syncLocked(ctx)
}

// syncLocked is sync with seqMu held.
func (x *run) syncLocked(ctx context.Context) {
	x.dirty = false
	evs, err := x.r.Store.Events(context.WithoutCancel(ctx), x.sessionID, x.lastSeq)
	if err != nil {
		return
	}
	for _, e := range evs {
		x.lastSeq = e.Seq
		x.onEvent(e.Kind, e.Payload)
		x.send(Event{Seq: e.Seq, Kind: e.Kind, Payload: e.Payload})
	}
}

// Run sends prompt to the session and runs the loop until the model is done. emit, if
// set, receives every committed event and every partial delta, in order.
func (r *Runner) Run(ctx context.Context, sessionID, prompt string, emit func(Event)) (Outcome, error) {
	return r.RunAs(ctx, NewRunID(), sessionID, prompt, emit)
}

// NewRunID names a new run.
func NewRunID() string { return "r-" + randHex(8) }

// RunAs is Run with the run's id chosen by the caller (NewRunID), so that a caller
// running the turn in the background (the HTTP API) can name it before it starts. The
// run starts (its row and the user message are committed) before emit receives its
// first committed event; an error before then means it never started (ErrBusy when
// another run has the session).
//
// Besides ctx, a cancel asked through the run's row (store.RequestCancel, by a process
// that does not run it) cancels the run: the heartbeat sees it.
func (r *Runner) RunAs(ctx context.Context, runID, sessionID, prompt string, emit func(Event)) (Outcome, error) {
	return r.RunMessage(ctx, runID, sessionID, events.UserMessage{Text: prompt}, emit)
}

// RunMessage is RunAs with a message that may carry attachments (already stored for the
// session: package attachments); the model reads msg.ModelText.
func (r *Runner) RunMessage(ctx context.Context, runID, sessionID string, msg events.UserMessage, emit func(Event)) (Outcome, error) {
	ss, err := r.Store.GetSession(ctx, sessionID)
	if err != nil {
		return Outcome{}, err
	}
	return r.RunMessageIn(ctx, runID, ss, msg, emit)
}

// RunMessageIn is RunMessage in session ss as the caller has just read it (the HTTP API
// reads it to authorize the request), saving a read: a run needs only its id, agent and
// owner, which never change. A session deleted since is ErrNotFound at the first commit.
func (r *Runner) RunMessageIn(ctx context.Context, runID string, ss store.Session, msg events.UserMessage, emit func(Event)) (Outcome, error) {
	var out Outcome
	sessionID := ss.ID
	if ss.Agent != r.Agent.Name {
		return out, fmt.Errorf("session %s belongs to agent %q, not %q", sessionID, ss.Agent, r.Agent.Name)
	}
	evs, err := r.repair(ctx, sessionID)
	if err != nil {
		return out, err
	}
	x := &run{r: r, sessionID: sessionID, runID: runID, user: ss.Owner, emit: emit}
	out.RunID = x.runID
	x.msgs = History(evs)
	if len(evs) > 0 {
		x.lastSeq = evs[len(evs)-1].Seq
	}
	liveRuns.Store(x.runID, true)
	defer liveRuns.Delete(x.runID)
	ctx = x.startTurn(ctx, &msg) // trace.go
	// The run row and the user message land together, before the model is called. The
	// database allows one running run per session, so of two harnesses (or two calls in
	// this one) that got past repair at the same moment, one starts and the other is told
	// the session is busy, having written nothing.
	if _, err := x.commit(ctx, store.Batch{StartRun: &store.Run{ID: x.runID, Owner: r.owner()}},
		msg); err != nil {
		x.endTurn(store.RunFailed, out)
		if errors.Is(err, store.ErrRunning) {
			return out, fmt.Errorf("%w: another run of session %s started at the same time; wait for it to finish, then send the message again", ErrBusy, sessionID)
		}
		return out, err
	}
	ctx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHB()
	go r.heartbeat(hbCtx, x.runID, cancelRun)

	status, detail, err := x.loop(ctx, msg.ModelText(), &out)
	stopHB()
	end := context.WithoutCancel(ctx)
	if err != nil && status == "" {
		status, detail = store.RunFailed, err.Error()
	}
	if _, e := x.commit(end, store.Batch{EndRun: &store.RunEnd{ID: x.runID, Status: status, Detail: detail}},
		events.RunFinished{RunID: x.runID, Status: status, Detail: detail,
			InputTokens: out.InputTokens, OutputTokens: out.OutputTokens, Steps: out.Steps}); e != nil && err == nil {
		err = e
	}
	out.Status = status
	x.endTurn(status, out)
	return out, err
}

// heartbeat stamps the run's row every HeartbeatEvery and cancels the run when the row
// says another process asked for it.
func (r *Runner) heartbeat(ctx context.Context, runID string, cancelRun context.CancelFunc) {
	every := r.HeartbeatEvery
	if every <= 0 {
		every = DefaultHeartbeatEvery
	}
	periodic.Run(ctx, every, func(ctx context.Context) bool {
		asked, err := r.Store.HeartbeatRun(ctx, runID)
		if err != nil {
			r.logger().Warn("run heartbeat failed", "run", runID, "err", err)
		}
		if asked {
			r.logger().Info("run cancelled through its row", "run", runID)
			cancelRun()
		}
		return true
	})
}

func (r *Runner) limits() (int64, int64) {
	turns, budget := r.Agent.MaxTurns(), r.Agent.TokenBudget()
	if r.MaxTurns > 0 {
		turns = r.MaxTurns
	}
	if r.TokenBudget > 0 {
		budget = r.TokenBudget
	}
	return turns, budget
}

// loop returns the run's final status and detail.
func (x *run) loop(ctx context.Context, prompt string, out *Outcome) (string, string, error) {
	r := x.r
	x.msgs = append(x.msgs, model.Message{Role: model.RoleUser, Text: prompt})
	maxTurns, budget := r.limits()
	specs := r.Tools.AllSpecs(ctx, r.Agent)
	replay := r.Agent.IsReplay()
	for {
		if ctx.Err() != nil {
			return x.cancelled(ctx, nil)
		}
		if int64(out.Steps) >= maxTurns {
			_, err := x.append(ctx, events.Limit{Limit: "max_turns", Value: maxTurns})
			return store.RunCompleted, fmt.Sprintf("stopped at max turns (%d)", maxTurns), err
		}
		if r.Budgets != nil {
			if err := r.Budgets.AdmitTokens(ctx, x.subject()); err != nil {
				_, aerr := x.append(ctx, events.Limit{Limit: "budget", Detail: err.Error()})
				return store.RunCompleted, "stopped: " + err.Error(), aerr
			}
		}
		req := model.Request{System: r.System(), Messages: x.msgs, Tools: specs}
		stepCtx, step := x.startStep(ctx, out.Steps+1)
		resp, err := r.Model.Generate(stepCtx, req, func(s string) { x.send(Event{Partial: true, Stream: "text", Delta: s}) })
		x.endStep(step, resp, err)
		if err != nil {
			if ctx.Err() != nil {
				return x.cancelled(ctx, nil)
			}
			r.logger().Warn("model call failed", "session", x.sessionID, "model", r.Model.Name(), "err", err)
			_, aerr := x.append(ctx, events.Error{Message: err.Error(), Where: "model"})
			return store.RunFailed, err.Error(), aerr
		}
		if r.Budgets != nil {
			r.Budgets.SpendTokens(ctx, x.subject(), resp.Usage.InputTokens+resp.Usage.OutputTokens)
		}
		out.Steps++
		out.Text = resp.Text
		out.InputTokens += resp.Usage.InputTokens
		out.OutputTokens += resp.Usage.OutputTokens
		x.msgs = append(x.msgs, model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
		end := context.WithoutCancel(ctx)
		if _, err := x.commit(ctx, store.Batch{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens},
			events.ModelMessage{Text: resp.Text, ToolCalls: resp.ToolCalls, Model: resp.Model,
				StopReason: resp.StopReason, Replay: replay},
			events.Usage{Step: resp.Usage, RunInputTokens: out.InputTokens,
				RunOutputTokens: out.OutputTokens, Budget: budget}); err != nil {
			return "", "", err
		}
		if len(resp.ToolCalls) == 0 {
			return store.RunCompleted, "", nil
		}
		if out.InputTokens+out.OutputTokens >= budget {
			if err := x.skipCalls(ctx, resp.ToolCalls, "not run: the token budget of this turn is spent"); err != nil {
				return "", "", err
			}
			_, err := x.append(ctx, events.Limit{Limit: "token_budget", Value: budget, Used: out.InputTokens + out.OutputTokens})
			return store.RunCompleted, fmt.Sprintf("stopped at the token budget (%d)", budget), err
		}
		for i, tc := range resp.ToolCalls {
			if ctx.Err() != nil {
				return x.cancelled(ctx, resp.ToolCalls[i:])
			}
			seq, err := x.append(ctx, events.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
			if err != nil {
				return "", "", err
			}
			toolCtx, span := x.startTool(ctx, tc)
			res := r.Tools.Run(toolCtx, tools.Call{
				SessionID: x.sessionID, RunID: x.runID, User: x.user, ToolCallID: tc.ID, Agent: r.Agent, Event: seq,
				Commands: func() []string { return x.commands(end) },
				// What the call appends itself (an approval it waits for) streams at once.
				Appended: func() { x.sync(end) },
				Output:   func(stream string, p []byte) { x.send(Event{Partial: true, Stream: stream, Delta: string(p)}) },
			}, tc)
			x.seqMu.Lock()
			x.dirty = true
			x.seqMu.Unlock()
			// The call returned: its result is recorded even when the cancel came as it
			// finished (a payment sent, a file written), so the log never claims a
			// completed call was stopped. Only the calls after it are cancelled.
			err = x.result(end, tc, res)
			x.endTool(span, res)
			if err != nil {
				return "", "", err
			}
			if ctx.Err() != nil {
				return x.cancelled(ctx, resp.ToolCalls[i+1:])
			}
		}
	}
}

// subject is who the run's spending is charged to.
func (x *run) subject() policy.Subject {
	return policy.Subject{User: x.user, Owner: x.r.Agent.Owner, Agent: x.r.Agent.Name, Session: x.sessionID, Turn: x.runID}
}

func (x *run) result(ctx context.Context, tc model.ToolCall, res tools.Result) error {
	if _, err := x.append(ctx, events.ToolResult{ID: tc.ID, Name: tc.Name, Text: res.Text, IsError: res.IsError,
		Truncated: res.Truncated, FullSize: res.FullSize, Provisioned: res.Provisioned, Artifact: events.ArtifactOf(res.Artifact)}); err != nil {
		return err
	}
	x.msgs = append(x.msgs, model.Message{Role: model.RoleTool, ToolCallID: tc.ID, Text: res.Text, IsError: res.IsError})
	return nil
}

// skipCalls gives every call an error result without running it.
func (x *run) skipCalls(ctx context.Context, calls []model.ToolCall, why string) error {
	for _, tc := range calls {
		if err := x.result(ctx, tc, tools.Result{Text: why, IsError: true, FullSize: len(why)}); err != nil {
			return err
		}
	}
	return nil
}

// cancelled records a cancel: the running command was stopped by the context; calls
// not finished get a result saying so.
func (x *run) cancelled(ctx context.Context, pending []model.ToolCall) (string, string, error) {
	end := context.WithoutCancel(ctx)
	x.sync(end)
	done := map[string]bool{}
	evs, _ := x.r.Store.Events(end, x.sessionID, 0)
	for _, e := range evs {
		if p, ok := events.As[events.ToolResult](e.Kind, e.Payload); ok {
			done[p.ID] = true
		}
	}
	var left []model.ToolCall
	for _, tc := range pending {
		if !done[tc.ID] {
			left = append(left, tc)
		}
	}
	if err := x.skipCalls(end, left, "cancelled by the user: the call was stopped or never started"); err != nil {
		return "", "", err
	}
	_, err := x.append(end, events.Cancelled{RunID: x.runID, Reason: "cancelled by the caller"})
	return store.RunCancelled, "cancelled", err
}

// commands lists the exec commands run in the session's current sandbox, oldest first.
func (x *run) commands(ctx context.Context) []string {
	evs, err := x.r.Store.Events(ctx, x.sessionID, 0)
	if err != nil {
		return nil
	}
	var cmds []string
	last := "" // the exec command of the latest tool_call, which may be the one that provisioned
	for _, e := range evs {
		switch e.Kind {
		case events.KindSandboxProvisioned:
			cmds = nil
			if last != "" {
				cmds = append(cmds, last)
			}
		case events.KindToolCall:
			last = ""
			var args tools.ExecArgs
			if p, ok := events.As[events.ToolCall](e.Kind, e.Payload); ok && p.Name == tools.NameExec && json.Unmarshal(p.Arguments, &args) == nil {
				cmds = append(cmds, args.Command)
				last = args.Command
			}
		}
	}
	return cmds
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
