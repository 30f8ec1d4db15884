package api

import (
	"log/slog"
	"reflect"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
)

// gathered is the series of m's registry by family name.
func gathered(t *testing.T, m *metrics) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// feed observes each payload, encoded as the runner commits it and passed along with
// its bytes, in order.
func feed(t *testing.T, o *runObserver, ps ...events.Payload) {
	t.Helper()
	for _, p := range ps {
		raw, err := events.Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		o.observe(p.Kind(), raw, p)
	}
}

// The fields read from an event the run passes along are those its bytes decode to, for
// every kind the metrics read (and none for the others), by value or by pointer.
func TestFieldsOfValueMatchDecoding(t *testing.T) {
	for _, p := range []events.Payload{
		events.UserMessage{Text: "hi"},
		events.ModelMessage{Model: "m", Text: "t", ToolCalls: []model.ToolCall{{ID: "c1", Name: "exec"}}},
		events.ToolCall{ID: "c1", Name: "exec"},
		events.ToolResult{ID: "c1", Name: "exec", Text: "ok"},
		events.RunFinished{RunID: "r", Status: "completed", Steps: 2},
		events.SandboxProvisioned{SandboxID: "s", Environment: "e", TookMS: 7},
		events.MCPCall{ToolCallID: "c2", Tool: "kb__x", Outcome: events.OutcomeDenied, DurationMS: 3},
		events.Error{Message: "m", Where: "model"},
		events.Usage{},
		events.Cancelled{},
	} {
		raw, err := events.Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		want, wantOK := fieldsOf(p.Kind(), raw)
		for _, v := range []events.Payload{p, pointerTo(p)} {
			got, ok := fieldsOfValue(v)
			if ok && (!wantOK || got != want) {
				t.Errorf("%T: %+v, want %+v (%v)", v, got, want, wantOK)
			}
			if !ok && wantOK {
				t.Errorf("%T: not read, want %+v", v, want)
			}
		}
	}
}

// pointerTo is a pointer to a copy of p.
func pointerTo(p events.Payload) events.Payload {
	v := reflect.New(reflect.TypeOf(p))
	v.Elem().Set(reflect.ValueOf(p))
	return v.Interface().(events.Payload)
}

// The observer times what spans events from the events as committed: the MCP calls'
// durations are theirs, a skipped call (a result without a call) is not timed, tool
// names past the cap count as "other", and a run's error counts by where.
func TestRunObserver(t *testing.T) {
	m := newMetrics(slog.New(slog.DiscardHandler), func() int { return 0 })
	o := m.run()
	feed(t, o,
		events.UserMessage{Text: "go"},
		events.ModelMessage{Model: "m1", ToolCalls: []model.ToolCall{{ID: "c1", Name: "code"}, {ID: "c2", Name: "code"}}},
		events.ToolCall{ID: "c1", Name: "code"},
		events.MCPCall{ToolCallID: "c1", Call: 1, Tool: "kb__lookup", Outcome: events.OutcomeCompleted, DurationMS: 1500},
		events.MCPCall{ToolCallID: "c1", Call: 2, Tool: "kb__lookup", Outcome: events.OutcomeDenied},
		events.ToolResult{ID: "c1", Name: "code"},
		events.ToolResult{ID: "c2", Name: "code", Text: "not run"},
		events.Error{Message: "boom", Where: "model"},
		events.RunFinished{Status: "failed"},
	)
	fs := gathered(t, m)
	count := func(name string, labelValue string) uint64 {
		t.Helper()
		for _, s := range fs[name].GetMetric() {
			if s.GetLabel()[0].GetValue() == labelValue {
				return s.GetHistogram().GetSampleCount()
			}
		}
		t.Fatalf("%s has no series %q", name, labelValue)
		return 0
	}
	if c := count("trueforge_mcp_call_seconds", "completed"); c != 1 {
		t.Errorf("completed MCP calls timed: %d", c)
	}
	for _, s := range fs["trueforge_mcp_call_seconds"].GetMetric() {
		if s.GetLabel()[0].GetValue() == "completed" && s.GetHistogram().GetSampleSum() != 1.5 {
			t.Errorf("MCP call seconds %v; want 1.5", s.GetHistogram().GetSampleSum())
		}
	}
	if c := count("trueforge_tool_call_seconds", "code"); c != 1 {
		t.Errorf("tool calls timed: %d; want 1 (c2 never ran)", c)
	}
	if c := count("trueforge_model_step_seconds", "m1"); c != 1 {
		t.Errorf("model steps timed: %d", c)
	}
	if c := count("trueforge_turn_seconds", "failed"); c != 1 {
		t.Errorf("turns timed: %d", c)
	}
	for _, s := range fs["trueforge_run_errors_total"].GetMetric() {
		if s.GetLabel()[0].GetValue() == "model" && s.GetCounter().GetValue() != 1 {
			t.Errorf("model errors %v; want 1", s.GetCounter().GetValue())
		}
	}

	b := newBoundedLabel(2)
	for _, v := range []string{"a", "b", "c", "a", ""} {
		_ = b.value(v)
	}
	if b.value("c") != "other" || b.value("a") != "a" || b.value("") != "unknown" {
		t.Errorf("bounded label: c=%q a=%q", b.value("c"), b.value("a"))
	}
}
