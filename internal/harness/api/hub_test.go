package api

import (
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
)

// An approval recorded while a script runs does not start the script's output afresh:
// the output after it goes on at its offset, so a page appends it rather than replacing
// what the script printed before its call waited. The step's end (tool_result) does.
func TestApprovalMidStepKeepsTheStepsOutput(t *testing.T) {
	h := &hub{subs: map[*subscriber]struct{}{}, pending: map[string]*strings.Builder{}, offsets: map[string]int{}}
	sub, _, _, _ := h.subscribe()
	out := func(s string) { h.emit("r-1", runner.Event{Partial: true, Stream: "stdout", Delta: s}) }
	commit := func(seq int64, kind string) { h.emit("r-1", runner.Event{Seq: seq, Kind: kind}) }
	out("before the call\n")
	commit(5, events.KindApprovalRequested)
	commit(6, events.KindApprovalDecided)
	out("after it\n")
	commit(7, events.KindToolResult)
	out("next step\n")
	var offsets []int
	for _, m := range sub.take() {
		if m.kind == msgDelta {
			offsets = append(offsets, m.offset)
		}
	}
	if len(offsets) != 3 || offsets[0] != 0 || offsets[1] != len("before the call\n") || offsets[2] != 0 {
		t.Fatalf("delta offsets %v; want 0, %d (the approval did not end the step), 0 (the tool result did)", offsets, len("before the call\n"))
	}
}
