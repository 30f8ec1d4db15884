package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// A member is claimable once ready and only with its config; a claim takes it for good;
// two stores (two replicas) claiming the same pool at once never get the same sandbox.
func TestWarmPoolClaims(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		now := time.UnixMilli(1_700_000_000_000)
		const members = 6
		for i := range members {
			must(t, st.PutPoolSandbox(ctx, PoolSandbox{SandboxID: fmt.Sprintf("p%d", i), Environment: "e", Provider: "local",
				SnapshotID: "snap", Config: "c1", State: PoolCreating, CreatedAt: now.Add(time.Duration(i) * time.Second)}))
		}
		if _, ok, err := st.ClaimPoolSandbox(ctx, "e", "c1"); err != nil || ok {
			t.Fatalf("claiming a pool of creating members: %v, %v; want none", ok, err)
		}
		for i := range members {
			if ok, err := st.MarkPoolSandboxReady(ctx, fmt.Sprintf("p%d", i)); err != nil || !ok {
				t.Fatalf("MarkPoolSandboxReady p%d: %v, %v", i, ok, err)
			}
		}
		if _, ok, err := st.ClaimPoolSandbox(ctx, "e", "c2"); err != nil || ok {
			t.Fatalf("claiming with another config: %v, %v; want none", ok, err)
		}
		other := reopen(t, st)
		var mu sync.Mutex
		got := map[string]int{}
		var wg sync.WaitGroup
		for w := range 2 * members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := st
				if w%2 == 1 {
					s = other
				}
				p, ok, err := s.ClaimPoolSandbox(ctx, "e", "c1")
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if ok {
					mu.Lock()
					got[p.SandboxID]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		for id, n := range got {
			if n != 1 {
				t.Errorf("sandbox %s claimed %d times", id, n)
			}
		}
		left, err := st.ListPoolSandboxes(ctx)
		if err != nil || len(left)+len(got) != members {
			t.Fatalf("%d claimed, %d left (%v); want %d in all", len(got), len(left), err, members)
		}
		if ok, err := st.MarkPoolSandboxReady(ctx, "p0"); err != nil || ok {
			t.Fatalf("marking a claimed member ready: %v, %v; want false", ok, err)
		}
	})
}

// The harness's role keeps the pools on PostgreSQL (a runtime table); a team cannot read
// them.
func TestWarmPoolHarnessRole(t *testing.T) {
	p := newRLSPlane(t)
	ctx := context.Background()
	h := p.asHarness
	must(t, h.PutPoolSandbox(ctx, PoolSandbox{SandboxID: "p1", Environment: "e", Provider: "local", SnapshotID: "snap", Config: "c", State: PoolCreating, CreatedAt: time.Now()}))
	if ok, err := h.MarkPoolSandboxReady(ctx, "p1"); err != nil || !ok {
		t.Fatalf("as the harness: %v, %v", ok, err)
	}
	if _, err := p.asAlice.ListPoolSandboxes(ctx); err == nil {
		t.Error("a team read the warm pools")
	}
	if c, ok, err := h.ClaimPoolSandbox(ctx, "e", "c"); err != nil || !ok || c.SandboxID != "p1" {
		t.Fatalf("claim as the harness: %+v, %v, %v", c, ok, err)
	}
}
