package codemode

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// The bridge: a script's stubs write one request per line to the bootstrap's stdout,
// and the harness answers each on its stdin (see bootstrap/python.py). Every request is
// decided and made here, with the harness's credentials and the session owner's
// identity, and recorded in the session's log (events.MCPCall).

// Bridge limits that are not the agent's to set.
const (
	// maxFrame is the largest request line a script may send (a call's arguments).
	maxFrame = 4 << 20
	// maxConcurrent is how many of a script's calls run at once; more wait their turn.
	maxConcurrent = 8
	// outputCap is how much of a script's output is kept (head and tail).
	outputCap = 1 << 20
)

type request struct {
	ID   int             `json:"id"`
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// script is one run of a script: the state its bridge shares between the calls.
type script struct {
	m      *Mode
	ctx    context.Context // the model's call: cancelled when the user cancels
	st     recorder
	call   tools.Call
	toolID string
	lim    agentspec.CodeModeLimits
	stop   context.CancelCauseFunc // ends the script, naming the limit it broke

	wmu   sync.Mutex // one reply at a time on stdin
	stdin io.Writer

	mu      sync.Mutex
	calls   int
	bytes   int64
	flights map[int]*flight
	sem     chan struct{}
	wg      sync.WaitGroup
	output  *sandbox.OutputBuffer
	clock   *runClock
}

// flight is a call the harness is making.
type flight struct {
	id     int // the bootstrap's request id
	n      int
	tool   string
	digest string
	// abandoned: the script ended first; the call's outcome is recorded late.
	abandoned bool
}

// recorder appends to the session's log.
type recorder interface {
	record(ctx context.Context, p events.MCPCall)
}

// limitError is a Code Mode limit that stopped a script.
type limitError struct{ msg string }

func (e limitError) Error() string { return e.msg }

// handle answers one request line; a line that is not a request is the script's
// output (a child that wrote to the bridge's descriptor: Node's inherited stdout).
func (s *script) handle(line []byte) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil || req.ID <= 0 || req.Tool == "" {
		_, _ = s.output.Write(append(line, '\n'))
		return
	}
	digest := sha256.Sum256(req.Args)
	s.mu.Lock()
	s.calls++
	n := s.calls
	if int64(n) > s.lim.MaxCalls {
		s.mu.Unlock()
		msg := fmt.Sprintf("the script made more than %d MCP calls (code_mode_limits.max_calls); it was stopped at call %d", s.lim.MaxCalls, n)
		s.record(events.MCPCall{Call: n, Tool: req.Tool, ArgsSHA256: hex.EncodeToString(digest[:]), Outcome: events.OutcomeLimit, Error: msg})
		s.reply(req.ID, nil, msg)
		s.stop(limitError{msg})
		return
	}
	f := &flight{id: req.ID, n: n, tool: req.Tool, digest: hex.EncodeToString(digest[:])}
	s.flights[n] = f
	s.mu.Unlock()
	s.wg.Add(1)
	s.m.pending.Add(1)
	go func() {
		defer s.m.pending.Done()
		defer s.wg.Done()
		s.sem <- struct{}{}
		defer func() { <-s.sem }()
		s.run(f, req)
	}()
}

// run makes one call and answers it.
func (s *script) run(f *flight, req request) {
	start := time.Now()
	rec := events.MCPCall{Call: f.n, Tool: req.Tool, ArgsSHA256: f.digest}
	var args map[string]any
	if len(req.Args) > 0 && !bytes.Equal(req.Args, []byte("null")) {
		if err := json.Unmarshal(req.Args, &args); err != nil {
			s.finish(f, rec, start, nil, events.OutcomeFailed, "the arguments are not a JSON object: "+err.Error())
			return
		}
	}
	// A call that waits for a person's approval does not spend the script's time: its
	// clock stops while the gate runs, and the per-call timeout starts after it.
	s.clock.pause()
	p, v, err := s.m.mcp.Authorize(s.ctx, s.call.Origin(), req.Tool, args)
	s.clock.resume()
	rec.Rule, rec.Approval = v.Rule, decided(v.Approval)
	switch {
	case errors.Is(err, mcptools.ErrDenied):
		s.finish(f, rec, start, nil, events.OutcomeDenied, err.Error())
		return
	case errors.Is(err, mcptools.ErrOverBudget):
		s.finish(f, rec, start, nil, events.OutcomeLimit, v.Refusal)
		return
	case errors.Is(err, mcptools.ErrUnknownTool):
		s.finish(f, rec, start, nil, events.OutcomeDenied, fmt.Sprintf("%s is not one of this agent's MCP tools (see the API in the tool's description)", req.Tool))
		return
	case err != nil:
		s.finish(f, rec, start, nil, events.OutcomeFailed, err.Error())
		return
	}
	// The call outlives a cancelled script: an operation already sent to a server is
	// not abandoned half-way, and its outcome is recorded when it ends.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), time.Duration(s.lim.CallTimeoutSeconds)*time.Second)
	defer cancel()
	v, err = p.Call(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		s.finish(f, rec, start, nil, events.OutcomeUnknown, fmt.Sprintf("no answer within %ds (code_mode_limits.call_timeout_seconds); the server may still carry it out", s.lim.CallTimeoutSeconds))
	case err != nil:
		s.finish(f, rec, start, nil, events.OutcomeFailed, err.Error())
	case v.IsError:
		rec.IsError = true
		s.finish(f, rec, start, nil, events.OutcomeCompleted, fmt.Sprintf("%s failed: %s", req.Tool, v.Text))
	default:
		var val any = v.Text
		if v.HasStructured {
			val = s.m.api().Minimize(req.Tool, v.Structured)
		}
		raw, err := json.Marshal(val)
		if err != nil {
			s.finish(f, rec, start, nil, events.OutcomeFailed, "the result cannot be encoded: "+err.Error())
			return
		}
		p.Spent(s.ctx, int64(len(raw)))
		s.finish(f, rec, start, raw, events.OutcomeCompleted, "")
	}
}

// decided is an approval's verdict as the call's record carries it.
func decided(v *mcptools.Verdict) *events.ApprovalDecided {
	if v == nil {
		return nil
	}
	return &events.ApprovalDecided{ID: v.ID, State: v.State, By: v.By, At: v.At, Note: v.Note}
}

// finish records a call's outcome and answers the script: with result, or with errMsg.
func (s *script) finish(f *flight, rec events.MCPCall, start time.Time, result []byte, outcome, errMsg string) {
	rec.Outcome, rec.DurationMS = outcome, time.Since(start).Milliseconds()
	s.mu.Lock()
	delete(s.flights, f.n)
	late := f.abandoned
	var over error
	if result != nil && !late {
		if s.bytes+int64(len(result)) > s.lim.MaxResultBytes {
			over = limitError{fmt.Sprintf("the results of the script's MCP calls passed %d bytes (code_mode_limits.max_result_bytes): call %d (%s) returned %d bytes after %d; it was stopped",
				s.lim.MaxResultBytes, f.n, f.tool, len(result), s.bytes)}
			rec.Error = "result withheld: " + over.Error()
			errMsg, result = over.Error(), nil
		} else {
			s.bytes += int64(len(result))
			rec.ResultBytes = len(result)
		}
	} else if result != nil {
		rec.ResultBytes = len(result)
	}
	s.mu.Unlock()
	if rec.Error == "" {
		rec.Error = errMsg
	}
	rec.Late = late
	s.record(rec)
	if late {
		return
	}
	s.reply(f.id, result, errMsg)
	if over != nil {
		s.stop(over)
	}
}

// record completes rec with the call's subject and appends it to the session's log.
func (s *script) record(rec events.MCPCall) {
	rec.ToolCallID, rec.User, rec.Agent = s.toolID, s.call.User, s.call.Agent.Name
	s.st.record(s.ctx, rec)
}

// reply answers the bootstrap's request id.
func (s *script) reply(id int, result []byte, errMsg string) {
	var line []byte
	if errMsg != "" {
		line, _ = json.Marshal(struct {
			ID    int    `json:"id"`
			Error string `json:"error"`
		}{id, errMsg})
	} else {
		if result == nil {
			result = []byte("null")
		}
		line, _ = json.Marshal(struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
		}{id, result})
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	// After the script ended the pipe is closed: nothing is waiting for the answer.
	_, _ = s.stdin.Write(append(line, '\n'))
}

// abandon marks the calls still running when the script ended and records each as
// unknown for now; their goroutines record how they end (late).
func (s *script) abandon(why string) []string {
	s.mu.Lock()
	var open []*flight
	for _, f := range s.flights {
		f.abandoned = true
		open = append(open, f)
	}
	s.mu.Unlock()
	var names []string
	for _, f := range open {
		names = append(names, fmt.Sprintf("%s (call %d)", f.tool, f.n))
		s.record(events.MCPCall{Call: f.n, Tool: f.tool, ArgsSHA256: f.digest, Outcome: events.OutcomeUnknown,
			Error: "in flight when the script " + why + "; its outcome is recorded when it ends"})
	}
	return names
}

// lines splits the bootstrap's stdout into request lines.
type lines struct {
	buf  []byte
	fn   func([]byte)
	over func()
}

func (l *lines) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		line := l.buf[:i]
		l.buf = l.buf[i+1:]
		if len(line) > 0 {
			l.fn(bytes.Clone(line))
		}
	}
	if len(l.buf) > maxFrame {
		l.buf = nil
		l.over()
	}
	return len(p), nil
}
