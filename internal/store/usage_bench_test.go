package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// benchUsageStore is an SQLite store with a year of 200 sessions' model steps, MCP calls
// and sandbox runs: about 146,000 events, one day's worth per session every 10 days.
func benchUsageStore(b *testing.B) *Store {
	b.Helper()
	st := openBench(b)
	ctx := context.Background()
	start := usageT0.Add(-365 * 24 * time.Hour)
	err := st.inTx(ctx, func(tx *txn) error {
		for i := range 200 {
			id := fmt.Sprintf("s%03d", i)
			if _, err := tx.ExecContext(ctx, `INSERT INTO sessions(id, agent, owner, created_at, updated_at) VALUES (?, ?, ?, 0, 0)`,
				id, fmt.Sprintf("agent%d", i%10), fmt.Sprintf("user%d", i%20)); err != nil {
				return err
			}
			seq := int64(0)
			add := func(at time.Time, kind, payload string) error {
				seq++
				_, err := tx.ExecContext(ctx, `INSERT INTO session_events(session_id, seq, run_id, kind, payload, created_at) VALUES (?, ?, 'r', ?, ?, ?)`,
					id, seq, kind, payload, at.UnixMilli())
				return err
			}
			for d := i % 10; d < 365; d += 10 {
				at := start.Add(time.Duration(d) * 24 * time.Hour)
				for _, e := range [][2]string{
					{"sandbox_provisioned", `{"environment":"py"}`},
					{"model_message", `{"text":"...","model":"claude-x"}`}, {"usage", `{"step":{"input_tokens":100,"output_tokens":10}}`},
					{"mcp_call", `{"tool":"db__query","outcome":"completed"}`},
					{"model_message", `{"text":"...","model":"claude-x"}`}, {"usage", `{"step":{"input_tokens":100,"output_tokens":10}}`},
					{"sandbox_stopped", `{"from":"running"}`},
				} {
					at = at.Add(time.Minute)
					if err := add(at, e[0], e[1]); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	st.now = func() time.Time { return usageT0 }
	return st
}

// BenchmarkUsage reads a window of that year: a week, and the longest window (93 days);
// the ratio of the two is what the kind-and-time index buys (without it both read the
// whole log).
func BenchmarkUsage(b *testing.B) {
	st := benchUsageStore(b)
	ctx := context.Background()
	for _, w := range []struct {
		name string
		d    time.Duration
	}{{"week", 7 * 24 * time.Hour}, {"93days", MaxUsageWindow}} {
		b.Run(w.name, func(b *testing.B) {
			f := UsageFilter{From: usageT0.Add(-w.d), To: usageT0}
			for b.Loop() {
				if _, err := st.Usage(ctx, f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendEventIndex is what migration 27's index costs every event append:
// the same appends with the index and, as the baseline in the same run, without it.
func BenchmarkAppendEventIndex(b *testing.B) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		drop bool
	}{{"without-index", true}, {"with-index", false}} {
		b.Run(c.name, func(b *testing.B) {
			st := openBench(b)
			if c.drop {
				if _, err := st.Exec(ctx, `DROP INDEX session_events_kind_time`); err != nil {
					b.Fatal(err)
				}
			}
			if err := st.CreateSession(ctx, Session{ID: "s", Agent: "a", Owner: "o"}); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := st.AppendEvent(ctx, "s", "r", "usage", []byte(`{"step":{"input_tokens":1,"output_tokens":1}}`)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// openBench opens a fresh SQLite store for a benchmark.
func openBench(b *testing.B) *Store {
	b.Helper()
	st, err := Open(context.Background(), filepath.Join(b.TempDir(), "cp.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}
