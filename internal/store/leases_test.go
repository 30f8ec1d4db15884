package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// A lease is one holder's at a time: taken when free, refused to another while it runs,
// renewed and re-taken by its holder, released only by its holder, and free for the
// next taker once it lapses (its holder died and stopped renewing).
func TestLeaseHolderAndExpiry(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		take := func(holder string, ttl time.Duration) bool {
			t.Helper()
			ok, err := st.AcquireLease(ctx, "sandbox/s-1", holder, ttl)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !take("a", time.Minute) {
			t.Fatal("a free lease was refused")
		}
		if take("b", time.Minute) {
			t.Fatal("b took a's running lease")
		}
		if !take("a", time.Minute) {
			t.Fatal("a could not take its own lease again")
		}
		if ok, err := st.RenewLease(ctx, "sandbox/s-1", "b", time.Minute); err != nil || ok {
			t.Fatalf("b renewed a's lease: %v, %v", ok, err)
		}
		must(t, st.ReleaseLease(ctx, "sandbox/s-1", "b"))
		if l, err := st.GetLease(ctx, "sandbox/s-1"); err != nil || l.Holder != "a" {
			t.Fatalf("after b's release: %+v, %v; want a's lease kept", l, err)
		}
		must(t, st.ReleaseLease(ctx, "sandbox/s-1", "a"))
		if _, err := st.GetLease(ctx, "sandbox/s-1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("released lease still there: %v", err)
		}
		if ok, err := st.RenewLease(ctx, "sandbox/s-1", "a", time.Minute); err != nil || ok {
			t.Fatalf("a renewed a lease it released: %v, %v", ok, err)
		}

		// a dies holding a short lease: b is kept out until it lapses, then takes it.
		if !take("a", 300*time.Millisecond) {
			t.Fatal("a could not take the free lease")
		}
		if take("b", time.Minute) {
			t.Fatal("b took a's lease before it lapsed")
		}
		time.Sleep(400 * time.Millisecond)
		if !take("b", time.Minute) {
			t.Fatal("b could not take a's lapsed lease")
		}
		if ok, err := st.RenewLease(ctx, "sandbox/s-1", "a", time.Minute); err != nil || ok {
			t.Fatalf("a renewed the lease b took over: %v, %v", ok, err)
		}
		l, err := st.GetLease(ctx, "sandbox/s-1")
		if err != nil || l.Holder != "b" || time.Until(l.ExpiresAt) < 30*time.Second {
			t.Fatalf("lease %+v, %v; want b's, a minute long", l, err)
		}
	})
}

// Renewing keeps a lease past its first expiry: a holder that renews is never
// overtaken, however long it works.
func TestLeaseRenewalKeepsItHeld(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		if ok, err := st.AcquireLease(ctx, "reaper", "a", 200*time.Millisecond); err != nil || !ok {
			t.Fatalf("acquire: %v, %v", ok, err)
		}
		for i := 0; i < 5; i++ {
			time.Sleep(100 * time.Millisecond)
			if ok, err := st.RenewLease(ctx, "reaper", "a", 200*time.Millisecond); err != nil || !ok {
				t.Fatalf("renewal %d: %v, %v", i, ok, err)
			}
			if ok, err := st.AcquireLease(ctx, "reaper", "b", time.Minute); err != nil || ok {
				t.Fatalf("b took the renewed lease after %d renewals: %v, %v", i+1, ok, err)
			}
		}
	})
}

// Bad arguments are refused with what is missing, never stored as a lease nobody holds
// or one that lapsed when it was taken.
func TestLeaseNeedsNameHolderAndDuration(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		for _, c := range []struct {
			name, holder string
			ttl          time.Duration
		}{{"", "a", time.Second}, {"x", "", time.Second}, {"x", "a", 0}} {
			_, err := st.AcquireLease(context.Background(), c.name, c.holder, c.ttl)
			if err == nil || !strings.Contains(err.Error(), "a lease needs a name, a holder and a positive duration") {
				t.Errorf("AcquireLease(%q, %q, %s): %v", c.name, c.holder, c.ttl, err)
			}
		}
	})
}

// Many processes (store handles) race for the same free leases, round after round:
// each round exactly one gets each lease.
func TestLeaseRaceHasOneWinner(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		const takers, rounds = 6, 25
		handles := []*Store{st}
		for len(handles) < takers {
			handles = append(handles, reopen(t, st))
		}
		for round := 0; round < rounds; round++ {
			name := fmt.Sprintf("sandbox/s-%d", round)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var winners []string
			start := make(chan struct{})
			for i, h := range handles {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					holder := fmt.Sprintf("replica-%d", i)
					ok, err := h.AcquireLease(ctx, name, holder, time.Minute)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						mu.Lock()
						winners = append(winners, holder)
						mu.Unlock()
					}
				}()
			}
			close(start)
			wg.Wait()
			if len(winners) != 1 {
				t.Fatalf("round %d: lease %s taken by %v; want exactly one holder", round, name, winners)
			}
			if l, err := st.GetLease(ctx, name); err != nil || l.Holder != winners[0] {
				t.Fatalf("round %d: stored lease %+v, %v; want %s's", round, l, err, winners[0])
			}
		}
	})
}

// Pruning removes only leases that lapsed long enough ago.
func TestPruneLeasesKeepsLiveOnes(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		if _, err := st.AcquireLease(ctx, "old", "dead", time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AcquireLease(ctx, "live", "a", time.Minute); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		if n, err := st.PruneLeases(ctx, time.Hour); err != nil || n != 0 {
			t.Fatalf("pruned %d (%v) leases lapsed under an hour ago", n, err)
		}
		if n, err := st.PruneLeases(ctx, 10*time.Millisecond); err != nil || n != 1 {
			t.Fatalf("pruned %d (%v); want the one lapsed lease", n, err)
		}
		if _, err := st.GetLease(ctx, "live"); err != nil {
			t.Fatalf("the live lease was pruned: %v", err)
		}
	})
}
