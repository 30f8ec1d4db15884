package store

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Charges fit up to the limit and the next is refused, with the usage reported and
// nothing charged; an allowed charge costs one statement.
func TestChargeBudgetUpToTheLimit(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		c := BudgetCharge{Budget: "merges", Key: "user=alice", User: "alice", WindowStart: time.UnixMilli(1_000), WindowEnd: time.UnixMilli(2_000),
			Calls: 1, Tokens: 10, Limits: BudgetLimits{Calls: 3}, Check: true}
		for i := int64(1); i <= 3; i++ {
			before := st.Queries()
			u, ok, err := st.ChargeBudget(ctx, c)
			if err != nil || !ok || u.Calls != i || u.Tokens != 10*i {
				t.Fatalf("charge %d: %+v, %v, %v; want %d calls", i, u, ok, err, i)
			}
			if n := st.Queries() - before; n != 1 {
				t.Fatalf("charge %d cost %d statements; want 1", i, n)
			}
			if u.Budget != "merges" || u.Key != "user=alice" || u.User != "alice" || !u.WindowStart.Equal(c.WindowStart) || !u.WindowEnd.Equal(c.WindowEnd) || u.UpdatedAt.IsZero() {
				t.Fatalf("charge %d: usage %+v does not name its counter", i, u)
			}
		}
		u, ok, err := st.ChargeBudget(ctx, c)
		if err != nil || ok || u.Calls != 3 || u.Tokens != 30 {
			t.Fatalf("charge past the limit: %+v, %v, %v; want refused at 3 calls", u, ok, err)
		}
		// Without the check (a charge for what was done anyway), the counter goes past.
		c.Check = false
		if u, ok, err := st.ChargeBudget(ctx, c); err != nil || !ok || u.Calls != 4 {
			t.Fatalf("unchecked charge: %+v, %v, %v; want 4 calls", u, ok, err)
		}

		// A new window starts from nothing.
		c.Check, c.WindowStart, c.WindowEnd = true, time.UnixMilli(2_000), time.UnixMilli(3_000)
		if u, ok, err := st.ChargeBudget(ctx, c); err != nil || !ok || u.Calls != 1 {
			t.Fatalf("first charge of the next window: %+v, %v, %v; want 1 call", u, ok, err)
		}

		// A charge bigger than the limit alone is refused, on a new counter too, which is
		// then not created.
		big := BudgetCharge{Budget: "merges", Key: "user=bob", User: "bob", Calls: 4, Limits: BudgetLimits{Calls: 3}, Check: true}
		if u, ok, err := st.ChargeBudget(ctx, big); err != nil || ok || u.Calls != 0 || u.Key != "user=bob" {
			t.Fatalf("a charge over the limit on a new counter: %+v, %v, %v; want refused at 0", u, ok, err)
		}
		if list, err := st.ListBudgetUsage(ctx, BudgetFilter{User: "bob"}); err != nil || len(list) != 0 {
			t.Fatalf("a refused first charge left %+v, %v", list, err)
		}
		if _, _, err := st.ChargeBudget(ctx, BudgetCharge{Budget: "merges", Key: "user=bob", Calls: -1}); err == nil {
			t.Fatal("a negative charge was accepted")
		}
	})
}

// A dimension measured after the fact (bytes, tokens, sandbox time) is charged 0 when a
// call starts, which passes while the counter is under its limit; the charge of what the
// call used, made without the check, may go past; then new work is refused.
func TestChargeBudgetAfterTheFact(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		start := BudgetCharge{Budget: "egress", Key: "owner=ops,agent=pr-bot", Calls: 1, Limits: BudgetLimits{Bytes: 100}, Check: true}
		used := BudgetCharge{Budget: "egress", Key: "owner=ops,agent=pr-bot"}
		if _, ok, err := st.ChargeBudget(ctx, start); err != nil || !ok {
			t.Fatalf("starting a call on a fresh counter: %v, %v", ok, err)
		}
		used.Bytes = 99
		if u, ok, err := st.ChargeBudget(ctx, used); err != nil || !ok || u.Bytes != 99 {
			t.Fatalf("charging 99 bytes: %+v, %v, %v", u, ok, err)
		}
		if u, ok, err := st.ChargeBudget(ctx, start); err != nil || !ok || u.Calls != 2 {
			t.Fatalf("starting a call at 99 of 100 bytes: %+v, %v, %v; want allowed", u, ok, err)
		}
		checked := start
		checked.Bytes = 2
		if u, ok, err := st.ChargeBudget(ctx, checked); err != nil || ok || u.Bytes != 99 {
			t.Fatalf("a checked charge of 2 bytes at 99 of 100: %+v, %v, %v; want refused", u, ok, err)
		}
		used.Bytes = 50
		if u, ok, err := st.ChargeBudget(ctx, used); err != nil || !ok || u.Bytes != 149 {
			t.Fatalf("charging what a call used past the limit: %+v, %v, %v; want 149 bytes", u, ok, err)
		}
		if u, ok, err := st.ChargeBudget(ctx, start); err != nil || ok || u.Bytes != 149 || u.Calls != 2 {
			t.Fatalf("starting a call with the bytes spent: %+v, %v, %v; want refused", u, ok, err)
		}
		// A limit of 0 is none: the same call on a budget without a bytes limit passes.
		start.Limits = BudgetLimits{Calls: 10}
		if u, ok, err := st.ChargeBudget(ctx, start); err != nil || !ok || u.Calls != 3 {
			t.Fatalf("a call under a calls-only limit: %+v, %v, %v", u, ok, err)
		}
	})
}

// Many sessions on two replicas charging one counter at once never pass its limit:
// exactly the limit's worth of charges succeed.
func TestChargeBudgetConcurrentNeverPassesTheLimit(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		replicas := []*Store{st, reopen(t, st)}
		const charges, limit = 40, 25
		var wins atomic.Int64
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range charges {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, ok, err := replicas[i%2].ChargeBudget(ctx, BudgetCharge{Budget: "calls", Key: "user=alice", User: "alice",
					WindowStart: time.UnixMilli(5_000), Calls: 1, Limits: BudgetLimits{Calls: limit}, Check: true})
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		list, err := st.ListBudgetUsage(ctx, BudgetFilter{Budget: "calls"})
		if wins.Load() != limit || err != nil || len(list) != 1 || list[0].Calls != limit {
			t.Fatalf("%d of %d charges succeeded, counter %+v, %v; want exactly %d", wins.Load(), charges, list, err, limit)
		}
	})
}

// Usage lists by user and budget, newest window first; pruning removes ended windows
// and keeps counters without an end.
func TestListAndPruneBudgetUsage(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		for _, c := range []BudgetCharge{
			{Budget: "calls", Key: "user=alice", User: "alice", WindowStart: time.UnixMilli(1_000), WindowEnd: time.UnixMilli(2_000), Calls: 1},
			{Budget: "calls", Key: "user=alice", User: "alice", WindowStart: time.UnixMilli(2_000), WindowEnd: time.UnixMilli(3_000), Calls: 2},
			{Budget: "calls", Key: "user=bob", User: "bob", WindowStart: time.UnixMilli(2_000), WindowEnd: time.UnixMilli(3_000), Calls: 3},
			{Budget: "tokens", Key: "session=s1,user=alice", User: "alice", Tokens: 7},
			{Budget: "agent", Key: "owner=ops,agent=pr-bot", WindowStart: time.UnixMilli(2_000), WindowEnd: time.UnixMilli(3_000), Calls: 4},
		} {
			if _, ok, err := st.ChargeBudget(ctx, c); err != nil || !ok {
				t.Fatalf("charging %+v: %v, %v", c, ok, err)
			}
		}
		counters := func(f BudgetFilter) string {
			t.Helper()
			list, err := st.ListBudgetUsage(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			out := ""
			for _, u := range list {
				out += u.Budget + "/" + u.Key + "@" + (time.Duration(millis(u.WindowStart)) * time.Millisecond).String() + " "
			}
			return out
		}
		if got, want := counters(BudgetFilter{User: "alice"}), "calls/user=alice@2s calls/user=alice@1s tokens/session=s1,user=alice@0s "; got != want {
			t.Fatalf("alice's usage: %q; want %q", got, want)
		}
		if list, _ := st.ListBudgetUsage(ctx, BudgetFilter{User: "alice", Budget: "tokens"}); len(list) != 1 || !list[0].WindowStart.IsZero() || !list[0].WindowEnd.IsZero() || list[0].Tokens != 7 {
			t.Fatalf("alice's tokens: %+v; want one counter without a window", list)
		}
		if got, want := counters(BudgetFilter{Budget: "calls"}), "calls/user=alice@2s calls/user=bob@2s calls/user=alice@1s "; got != want {
			t.Fatalf("the calls budget: %q; want %q", got, want)
		}
		if n, err := st.PruneBudgetUsage(ctx, time.UnixMilli(3_000)); err != nil || n != 1 {
			t.Fatalf("pruning windows ended before 3s: %d, %v; want 1", n, err)
		}
		if n, err := st.PruneBudgetUsage(ctx, time.UnixMilli(10_000)); err != nil || n != 3 {
			t.Fatalf("pruning windows ended before 10s: %d, %v; want 3", n, err)
		}
		if got, want := counters(BudgetFilter{}), "tokens/session=s1,user=alice@0s "; got != want {
			t.Fatalf("after pruning: %q; want %q", got, want)
		}
	})
}
