package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// PoolOrphanAge is how long a box labelled as a warm pool member may go unclaimed by
// any row (no pool row, no session record) before the keeper deletes it: seen so on a
// sweep and still so on a sweep at least this much later. A claim or a drop takes a
// member's row before it relabels or deletes the box, and a harness that dies between
// the two leaves the box with nothing pointing at it; the wait covers a claim in flight
// (its session record is written within the same call).
const PoolOrphanAge = time.Minute

// poolOrphans remembers when each orphaned pool box was first seen, and when the last
// sweep ran (Manager.orphans): a sweep lists every sandbox of a provider, which on
// Daytona pages through the organization's, so it runs at most every half
// PoolOrphanAge, not at every pass of the keeper.
type poolOrphans struct {
	first map[string]time.Time
	last  time.Time
}

// sweepPoolOrphans deletes the boxes of the pools' providers that carry LabelPool and
// that neither a pool row nor a live session record points at, once they have been seen
// so for PoolOrphanAge. The deletions are reported as a member's are (pooled → deleted),
// so that `serve` prints them with the reaper's. providers are the sandbox providers of
// the environments that keep a pool or have members; rows are the pool's rows as the
// pass read them.
func (m *Manager) sweepPoolOrphans(ctx context.Context, providers map[string]bool, rows []store.PoolSandbox) []Transition {
	now := m.cfg.Now()
	m.mu.Lock()
	due := now.Sub(m.orphans.last) >= PoolOrphanAge/2
	if due {
		m.orphans.last = now
	}
	m.mu.Unlock()
	if !due {
		return nil
	}
	live := map[string]bool{}
	for _, p := range rows {
		live[p.SandboxID] = true
	}
	recs, err := m.cfg.Store.ListSessionSandboxes(ctx)
	if err != nil {
		return []Transition{{From: fromPool, Err: fmt.Errorf("sweeping orphaned warm pool sandboxes: %w", err)}}
	}
	for _, r := range recs {
		if r.State != store.SandboxStateDeleted {
			live[r.SandboxID] = true
		}
	}
	seen := map[string]bool{}
	var out []Transition
	for name := range providers {
		prov, err := m.cfg.Store.GetSandboxProvider(ctx, name)
		if err != nil {
			continue // gone with its environments: nothing of it to sweep
		}
		rt, err := m.cfg.Runtimes.Runtime(ctx, prov)
		if err != nil {
			out = append(out, Transition{From: fromPool, Err: err})
			continue
		}
		infos, err := rt.List(ctx)
		if err != nil {
			out = append(out, Transition{From: fromPool, Err: fmt.Errorf("listing the sandboxes of provider %q for orphaned warm pool members: %w", name, err)})
			continue
		}
		for _, info := range infos {
			if info.Labels[LabelPool] == "" || live[info.ID] {
				continue
			}
			seen[info.ID] = true
			m.mu.Lock()
			if m.orphans.first == nil {
				m.orphans.first = map[string]time.Time{}
			}
			first, ok := m.orphans.first[info.ID]
			if !ok {
				m.orphans.first[info.ID] = now
			}
			m.mu.Unlock()
			if !ok || now.Sub(first) < PoolOrphanAge {
				continue
			}
			tr := Transition{SandboxID: info.ID, From: fromPool, To: store.SandboxStateDeleted}
			if err := deleted(rt.Delete(ctx, info.ID)); err != nil {
				tr.Err = fmt.Errorf("deleting orphaned warm pool sandbox %s: %w", info.ID, err)
			} else if m.cfg.Network != nil {
				m.cfg.Network.Detach(ctx, info.ID, true) // a proxied member's socket directory
			}
			out = append(out, tr)
		}
	}
	m.mu.Lock()
	for id := range m.orphans.first {
		if !seen[id] {
			delete(m.orphans.first, id) // deleted, or claimed after all
		}
	}
	m.mu.Unlock()
	return out
}
