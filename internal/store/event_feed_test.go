package store

import (
	"context"
	"testing"
	"time"
)

// A watch on a session's log rings after each append to it, and only to it: at once for
// this process's appends on both databases, and on PostgreSQL for another process's too
// (LISTEN/NOTIFY), with the seq it reached; an append that rolls back announces nothing.
func TestWatchEventsRingsOnAppend(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		for _, id := range []string{"s1", "s2"} {
			must(t, st.CreateSession(ctx, Session{ID: id, Agent: "a", Owner: "o"}))
		}
		w := st.WatchEvents("s1")
		defer w.Close()
		if st.Shared() {
			// The first watch starts the listener, which rings every watch once it
			// listens (it may have missed appends): let that pass.
			deadline := time.Now().Add(10 * time.Second)
			for st.EventListens() == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if st.EventListens() == 0 {
				t.Fatal("the event listener did not start LISTENing within 10s")
			}
			drain(w)
			w.Pending(0)
		}
		if w.Pending(0) {
			t.Fatal("a new watch is pending before any append")
		}

		// This process: Commit and AppendEvent.
		if _, err := st.Commit(ctx, Batch{SessionID: "s1", Events: []EventInput{{Kind: "x", Payload: []byte(`{}`)}, {Kind: "x", Payload: []byte(`{}`)}}}); err != nil {
			t.Fatal(err)
		}
		waitRing(t, w, "a commit of this process")
		if !w.Pending(1) || w.Pending(2) {
			t.Fatal("after a commit up to seq 2: want pending after 1, not after 2")
		}
		if _, err := st.AppendEvent(ctx, "s2", "", "x", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AppendEvent(ctx, "s1", "", "x", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		waitRing(t, w, "an append of this process")
		if !w.Pending(2) || w.Pending(3) {
			t.Fatal("after an append of seq 3: want pending after 2, not after 3 (s2's append is not s1's)")
		}
		if _, err := st.Commit(ctx, Batch{SessionID: "missing", Events: []EventInput{{Kind: "x", Payload: []byte(`{}`)}}}); err == nil {
			t.Fatal("a commit to a missing session succeeded")
		}

		if !st.Shared() {
			return
		}
		// Another process on PostgreSQL: its NOTIFY reaches this one's listener.
		other := reopen(t, st)
		if _, err := other.Commit(ctx, Batch{SessionID: "s1", Events: []EventInput{{Kind: "x", Payload: []byte(`{}`)}}}); err != nil {
			t.Fatal(err)
		}
		// The echoes of this process's own appends may ring first.
		deadline := time.Now().Add(5 * time.Second)
		for !w.Pending(3) && time.Now().Before(deadline) {
			select {
			case <-w.Ready():
			case <-time.After(time.Until(deadline)):
			}
		}
		if !w.Pending(3) || w.Pending(4) {
			t.Fatal("after another process's commit of seq 4: want pending after 3 within 5s, and not after 4")
		}
	})
}

// waitRing waits up to 5 s for w to ring.
func waitRing(t *testing.T, w *EventWatch, what string) {
	t.Helper()
	select {
	case <-w.Ready():
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not ring the watch within 5s", what)
	}
}

func drain(w *EventWatch) {
	for {
		select {
		case <-w.Ready():
		default:
			return
		}
	}
}
