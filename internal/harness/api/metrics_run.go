package api

import (
	"encoding/json"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
)

// runObserver times what spans two committed events of one run: the turn (user_message
// to run_finished), each model step (from the event the model call followed, the user
// message or the step's last tool_result, to the model_message) and each tool call
// (tool_call to the tool_result of the same id). The times are when the events reach
// the server, just after their commit, so each latency includes one commit (a
// millisecond or so) and no clock of another process.
//
// A run's events reach its emit one at a time (the runner serializes them), so an
// observer needs no lock; one is made per run.
type runObserver struct {
	m        *metrics
	began    time.Time // the user message; zero before it
	stepFrom time.Time // what the next model call follows; zero when none is due
	calls    map[string]pendingCall
}

// pendingCall is a tool call whose result has not come yet.
type pendingCall struct {
	tool string
	at   time.Time
}

// run returns the observer of a new run.
func (m *metrics) run() *runObserver {
	return &runObserver{m: m, calls: map[string]pendingCall{}}
}

// observe counts a committed event of the run (metrics.count) and times what it ends.
// value is the event as the run committed it (runner.Event.Value), read instead of
// decoding payload when set: decoding every event again was about 24 µs of a scripted
// turn (issue 31).
func (o *runObserver) observe(kind string, payload json.RawMessage, value events.Payload) {
	f, ok := fieldsOfValue(value)
	if !ok {
		f, ok = fieldsOf(kind, payload)
	}
	if !ok {
		return
	}
	o.m.count(kind, f)
	now := time.Now()
	switch kind {
	case events.KindUserMessage:
		o.began, o.stepFrom = now, now
	case events.KindModelMessage:
		if !o.stepFrom.IsZero() {
			o.m.modelStep.WithLabelValues(o.m.models.value(f.Model)).Observe(now.Sub(o.stepFrom).Seconds())
		}
		o.stepFrom = time.Time{}
	case events.KindToolCall:
		o.calls[f.ID] = pendingCall{tool: f.Name, at: now}
	case events.KindToolResult:
		// A call skipped without running (a spent budget, a cancel) has a result but no
		// tool_call: it took no time and is not observed.
		if c, ok := o.calls[f.ID]; ok {
			delete(o.calls, f.ID)
			o.m.toolCall.WithLabelValues(o.m.tools.value(c.tool)).Observe(now.Sub(c.at).Seconds())
		}
		o.stepFrom = now
	case events.KindRunFinished:
		if o.began.IsZero() {
			return
		}
		status := f.Status
		if status == "" {
			status = "unknown"
		}
		o.m.turn.WithLabelValues(status).Observe(now.Sub(o.began).Seconds())
	}
}

// eventFields are the few fields of the events the metrics read, by their names in
// the events package: one decode per event into this small struct, which leaves texts,
// arguments and results unread into Go values. The events are this harness's own, just
// committed, so none is in an older shape that only events.Decode reads.
type eventFields struct {
	ID          string `json:"id"`          // tool_call, tool_result
	Name        string `json:"name"`        // tool_call
	Model       string `json:"model"`       // model_message
	Status      string `json:"status"`      // run_finished
	SandboxID   string `json:"sandbox_id"`  // sandbox_provisioned
	Environment string `json:"environment"` // sandbox_provisioned
	TookMS      int64  `json:"took_ms"`     // sandbox_provisioned
	Outcome     string `json:"outcome"`     // mcp_call
	DurationMS  int64  `json:"duration_ms"` // mcp_call
	Where       string `json:"where"`       // error
}

// fieldsOf decodes the fields of an event of a kind the metrics read; ok is false for
// the other kinds, which are not decoded at all.
func fieldsOf(kind string, payload json.RawMessage) (f eventFields, ok bool) {
	switch kind {
	case events.KindUserMessage:
		return f, true // its time is all that is read
	case events.KindModelMessage, events.KindToolCall, events.KindToolResult, events.KindRunFinished,
		events.KindSandboxProvisioned, events.KindMCPCall, events.KindError:
		// A payload that does not decode leaves zero fields: still counted, labelled
		// "unknown" where a label was empty.
		_ = json.Unmarshal(payload, &f)
		return f, true
	}
	return f, false
}

// fieldsOfValue reads from an event the fields fieldsOf decodes from its payload; ok is
// false for nil and for the kinds not read here (which fieldsOf then looks at).
func fieldsOfValue(p events.Payload) (f eventFields, ok bool) {
	switch e := p.(type) {
	case events.UserMessage, *events.UserMessage:
		return f, true // its time is all that is read
	case events.ModelMessage:
		f.Model = e.Model
	case *events.ModelMessage:
		f.Model = e.Model
	case events.ToolCall:
		f.ID, f.Name = e.ID, e.Name
	case *events.ToolCall:
		f.ID, f.Name = e.ID, e.Name
	case events.ToolResult:
		f.ID, f.Name = e.ID, e.Name
	case *events.ToolResult:
		f.ID, f.Name = e.ID, e.Name
	case events.RunFinished:
		f.Status = e.Status
	case *events.RunFinished:
		f.Status = e.Status
	default:
		return fieldsOfRare(p)
	}
	return f, true
}

// fieldsOfRare is fieldsOfValue for the kinds a scripted turn has none of.
func fieldsOfRare(p events.Payload) (f eventFields, ok bool) {
	switch e := p.(type) {
	case events.SandboxProvisioned:
		f.SandboxID, f.Environment, f.TookMS = e.SandboxID, e.Environment, e.TookMS
	case *events.SandboxProvisioned:
		f.SandboxID, f.Environment, f.TookMS = e.SandboxID, e.Environment, e.TookMS
	case events.MCPCall:
		f.Outcome, f.DurationMS = e.Outcome, e.DurationMS
	case *events.MCPCall:
		f.Outcome, f.DurationMS = e.Outcome, e.DurationMS
	case events.Error:
		f.Where = e.Where
	case *events.Error:
		f.Where = e.Where
	default:
		return f, false
	}
	return f, true
}
