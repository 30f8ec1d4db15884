package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// The event streams here poll the store once an hour: whatever they deliver within
// the tests' seconds came through the hub or the store's event feed.
func noPoll(c *api.Config) { c.PollInterval = time.Hour }

// stepsAgent is a script of n steps, each with text and a tool call, then a last text:
// a turn long enough (80 ms a step) to reconnect in the middle of.
func stepsAgent(n int) map[string]any {
	var turns []map[string]any
	for i := 0; i < n; i++ {
		turns = append(turns, map[string]any{"text": fmt.Sprintf("step %d", i), "delay_ms": 80,
			"tool_calls": []any{map[string]any{"name": "read_output", "arguments": map[string]any{"call_id": "none"}}}})
	}
	return script(append(turns, map[string]any{"text": "All done.", "delay_ms": 80})...)
}

// An event another writer of this process appends outside any run (as the sandbox
// manager and the reaper do) reaches an idle stream at once, through the store's event
// feed, rather than at the next poll.
func TestIdleStreamGetsAppendsWithoutPolling(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: noPoll})
	harnesstest.AddAgent(t, f.st, "talker", "", harnesstest.AgentSpec{"model": script(text("hello"))})
	sid := f.newSession("alice", "talker")
	evs, stop := f.stream("alice", sid, "")
	defer stop()
	f.send("alice", sid, "hi")
	until(t, evs, 10*time.Second, runFinished)
	seq, err := events.Append(context.Background(), f.st, sid, "", events.SandboxLost{SandboxID: "sb-1", State: "running"})
	if err != nil {
		t.Fatal(err)
	}
	got := until(t, evs, 5*time.Second, func(e sse) bool { return e.event == events.KindSandboxLost })
	if e := got[len(got)-1]; e.seq() != seq || !strings.Contains(e.data, `"sandbox_id":"sb-1"`) {
		t.Fatalf("the appended event came as id %s %s; want id %d", e.id, e.data, seq)
	}
}

// On PostgreSQL, replica B streams the events of a run on replica A through the
// store's event feed (LISTEN/NOTIFY), without polling. A stream that reconnects to B in
// the middle of the run with Last-Event-ID misses and repeats nothing, and every event
// B read from the store has the same id and data as A's stream had from the run itself
// (the run's own encoding, passed on without a store read).
func TestAnotherReplicasEventsWithoutPolling(t *testing.T) {
	_, harnessURL := harnessRoleDB(t, func(owner *store.Store) {
		harnesstest.AddAgent(t, owner, "stepper", "", harnesstest.AgentSpec{"model": stepsAgent(5)})
	})
	a := newFixture(t, fixtureOpts{st: storetest.Open(t, harnessURL), cfg: noPoll})
	other := storetest.Open(t, harnessURL)
	b := newFixture(t, fixtureOpts{st: other, noUsers: true, cfg: noPoll})
	b.tokens = a.tokens
	sid := a.newSession("alice", "stepper")
	onA, stopA := a.stream("alice", sid, "")
	defer stopA()
	onB, stopB := b.stream("alice", sid, "")
	defer stopB()
	// B's feed listens before the run starts, so what follows is NOTIFY's doing (an
	// append before LISTEN would be caught by the ring that follows it, not tested here).
	deadline := time.Now().Add(10 * time.Second)
	for other.EventListens() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if other.EventListens() == 0 {
		t.Fatal("replica B's event feed did not LISTEN within 10s")
	}

	a.send("alice", sid, "go")
	part := committed(until(t, onB, 10*time.Second, func(e sse) bool { return e.event == events.KindToolResult && e.seq() >= 5 }))
	stopB() // dropped mid-turn
	last := part[len(part)-1]
	resumed, stop2 := b.stream("alice", sid, last.id)
	defer stop2()
	onBoth := append(part, committed(until(t, resumed, 10*time.Second, runFinished))...)
	fromA := committed(until(t, onA, 10*time.Second, runFinished))

	if len(onBoth) != len(fromA) {
		t.Fatalf("replica B's streams: %v\nreplica A's: %v", kindsOf(onBoth), kindsOf(fromA))
	}
	for i, e := range onBoth {
		if e.seq() != int64(i+1) {
			t.Fatalf("event %d on B has id %s: the resumed stream repeats or misses events: %v", i+1, e.id, kindsOf(onBoth))
		}
		if x := fromA[i]; e.id != x.id || e.event != x.event || e.data != x.data {
			t.Fatalf("event %d: B has %s %s %s, A had %s %s %s", i+1, e.id, e.event, e.data, x.id, x.event, x.data)
		}
	}
}
