package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestSessionEventsAreGaplessUnderConcurrencyAndDeletedWithTheSession(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		must(t, st.CreateSession(ctx, Session{ID: "s1", Agent: "a", Owner: "o"}))
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := st.Commit(ctx, Batch{SessionID: "s1", Events: []EventInput{{"x", []byte(`{}`)}, {"y", []byte(`{}`)}}, InputTokens: 1}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		evs, err := st.Events(ctx, "s1", 0)
		if err != nil || len(evs) != 40 {
			t.Fatalf("%d events, %v; want 40", len(evs), err)
		}
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				t.Fatalf("event %d has seq %d: the log has a gap or a duplicate", i, e.Seq)
			}
			if i%2 == 1 && (evs[i-1].Kind != "x" || e.Kind != "y") {
				t.Fatalf("a batch was interleaved with another at seq %d", e.Seq)
			}
		}
		ss, _ := st.GetSession(ctx, "s1")
		if ss.InputTokens != 20 {
			t.Fatalf("input tokens %d; want 20", ss.InputTokens)
		}
		now := time.Now()
		must(t, st.PutSessionSandbox(ctx, SessionSandbox{SessionID: "s1", Provider: "p", ProviderType: "local", SandboxID: "sb", State: SandboxStateRunning, Generation: 1, CreatedAt: now, LastUsedAt: now, StateAt: now}))
		must(t, st.PutToolOutput(ctx, "s1", "c1", []byte("full")))
		must(t, st.DeleteSession(ctx, "s1"))
		if evs, _ := st.Events(ctx, "s1", 0); len(evs) != 0 {
			t.Fatal("events outlived their session")
		}
		if _, err := st.GetSessionSandbox(ctx, "s1"); !errors.Is(err, ErrNotFound) {
			t.Fatal("the sandbox record outlived its session")
		}
		if _, err := st.GetToolOutput(ctx, "s1", "c1"); !errors.Is(err, ErrNotFound) {
			t.Fatal("a kept output outlived its session")
		}
	})
}

// The reaper's compare-and-swap never moves a busy sandbox or one used since it looked.
func TestSandboxStateSwapRespectsBusyAndRecentUse(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		must(t, st.CreateSession(ctx, Session{ID: "s1", Agent: "a", Owner: "o"}))
		t0 := time.Now()
		must(t, st.PutSessionSandbox(ctx, SessionSandbox{SessionID: "s1", Provider: "p", ProviderType: "local", SandboxID: "sb", State: SandboxStateRunning, Generation: 1, CreatedAt: t0, LastUsedAt: t0, StateAt: t0}))
		later := t0.Add(time.Hour)
		if ok, _ := st.BeginSandboxUse(ctx, "s1", "me", t0); !ok {
			t.Fatal("BeginSandboxUse on a running sandbox failed")
		}
		if ok, _ := st.SwapSandboxState(ctx, "s1", []string{SandboxStateRunning}, SandboxStateChanging, later, later); ok {
			t.Fatal("a busy sandbox was moved")
		}
		must(t, st.EndSandboxUse(ctx, "s1", t0.Add(30*time.Minute)))
		if ok, _ := st.SwapSandboxState(ctx, "s1", []string{SandboxStateRunning}, SandboxStateChanging, later, t0.Add(15*time.Minute)); ok {
			t.Fatal("a sandbox used after the idle cut-off was moved")
		}
		if ok, _ := st.SwapSandboxState(ctx, "s1", []string{SandboxStateRunning}, SandboxStateStopped, later, later); !ok {
			t.Fatal("an idle sandbox was not moved")
		}
		if ok, _ := st.BeginSandboxUse(ctx, "s1", "me", later); ok {
			t.Fatal("a call began on a stopped sandbox")
		}
	})
}

// Two harness processes (two handles on one database) start a run of one session at the
// same moment: exactly one starts; the other gets ErrRunning and writes nothing. Once the
// run ends, a new one may start.
func TestOnlyOneRunningRunPerSession(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		must(t, st.CreateSession(ctx, Session{ID: "s1", Agent: "a", Owner: "o"}))
		other := reopen(t, st)
		for round := 0; round < 10; round++ {
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, h := range []*Store{st, other} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = h.Commit(ctx, Batch{SessionID: "s1", StartRun: &Run{ID: fmt.Sprintf("r-%d-%d", round, i), Owner: fmt.Sprint("p", i)},
						Events: []EventInput{{Kind: "user_message", Payload: []byte(`{}`)}}})
				}()
			}
			wg.Wait()
			started := 0
			for _, e := range errs {
				switch {
				case e == nil:
					started++
				case !errors.Is(e, ErrRunning):
					t.Fatalf("round %d: %v; want ErrRunning for the loser", round, e)
				}
			}
			if started != 1 {
				t.Fatalf("round %d: %d runs started; want exactly 1 (%v)", round, started, errs)
			}
			evs, _ := st.Events(ctx, "s1", 0)
			if len(evs) != round+1 {
				t.Fatalf("round %d: %d events; the refused run wrote its message", round, len(evs))
			}
			runs, _ := st.Runs(ctx, "s1")
			for _, r := range runs {
				if r.Status == RunRunning {
					if _, err := st.EndRun(ctx, r.ID, RunCompleted, ""); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	})
}

// A database where the race already left two running runs in a session migrates: one
// is ended as interrupted, and the rule holds from then on.
func TestMigrationEndsDuplicateRunningRuns(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		must(t, st.CreateSession(ctx, Session{ID: "s1", Agent: "a", Owner: "o"}))
		// Back to schema 3, then the race's leftovers.
		for _, q := range []string{`DROP INDEX session_runs_one_running`, `DELETE FROM schema_migrations WHERE version = 4`} {
			if _, err := st.DB().Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range []string{"r-a", "r-b"} {
			must(t, st.StartRun(ctx, Run{ID: id, SessionID: "s1", Owner: "p"}))
		}
		st.Close()
		st = reopen(t, st)
		runs, _ := st.Runs(ctx, "s1")
		running := 0
		for _, r := range runs {
			if r.Status == RunRunning {
				running++
			}
		}
		if len(runs) != 2 || running != 1 {
			t.Fatalf("runs after migration: %+v; want one of the two still running", runs)
		}
		if err := st.StartRun(ctx, Run{ID: "r-c", SessionID: "s1", Owner: "p"}); !errors.Is(err, ErrRunning) {
			t.Fatalf("a third run started next to a running one: %v", err)
		}
	})
}
