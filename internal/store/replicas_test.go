package store

import (
	"context"
	"errors"
	"testing"
)

// RunningRuns lists the running runs of every session and nothing that ended: what a
// replica looks through for runs whose harness died.
func TestRunningRunsListsEverySessionsRunningRun(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		for _, id := range []string{"s1", "s2"} {
			must(t, st.CreateSession(ctx, Session{ID: id, Agent: "a", Owner: "o"}))
		}
		for _, r := range []Run{{ID: "r1", SessionID: "s1", Owner: "h:1:1"}, {ID: "r2", SessionID: "s2", Owner: "h:2:2"}, {ID: "r3", SessionID: "s1", Owner: "h:3:3"}} {
			if r.ID == "r3" {
				if ok, err := st.EndRun(ctx, "r1", RunCompleted, ""); err != nil || !ok {
					t.Fatalf("ending r1: %v, %v", ok, err)
				}
			}
			must(t, st.StartRun(ctx, r))
		}
		runs, err := st.RunningRuns(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range runs {
			if r.Status != RunRunning || r.HeartbeatAt.IsZero() {
				t.Errorf("run %+v: want running with a heartbeat", r)
			}
			got[r.ID] = r.SessionID + " " + r.Owner
		}
		if len(got) != 2 || got["r2"] != "s2 h:2:2" || got["r3"] != "s1 h:3:3" {
			t.Fatalf("running runs %v; want r2 of s2 and r3 of s1", got)
		}
	})
}

// A snapshot's host is recorded and read back as given; a snapshot that is not there
// is ErrNotFound either way.
func TestSnapshotHostRoundTrip(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		seed(t, st)
		if h, err := st.SnapshotHost(ctx, "snap-1"); err != nil || h != "" {
			t.Fatalf("host of a new snapshot: %q, %v; want unrecorded", h, err)
		}
		const host = `{"host":"build-01","machine":"3f2a","dir":"/var/lib/trueforge/local-backend"}`
		must(t, st.SetSnapshotHost(ctx, "snap-1", host))
		if h, err := st.SnapshotHost(ctx, "snap-1"); err != nil || h != host {
			t.Fatalf("host: %q, %v; want %q", h, err, host)
		}
		if err := st.SetSnapshotHost(ctx, "snap-x", host); !errors.Is(err, ErrNotFound) {
			t.Fatalf("setting the host of a missing snapshot: %v", err)
		}
		if _, err := st.SnapshotHost(ctx, "snap-x"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("reading the host of a missing snapshot: %v", err)
		}
	})
}
