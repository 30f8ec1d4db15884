// Package builds turns an environment's build inputs into a Ready snapshot: it claims the
// content-addressed snapshot in the store (so identical inputs build once, across
// environments and concurrent applies), starts the backend build, waits for it within the
// caller's deadline, and collects snapshots nothing points at any more.
package builds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// startGrace is how long a claimed snapshot may go without a backend build before it is
// taken for abandoned (its claimer died between claim and start).
const startGrace = 30 * time.Second

// Coordinator drives snapshot builds of one sandbox provider.
type Coordinator struct {
	Store    *store.Store
	Builder  sandbox.SnapshotBuilder
	Provider string // the sandbox provider's name
	// Poll is the first wait between state checks; it doubles up to one second.
	Poll time.Duration
}

// reuser is a SnapshotBuilder whose StartBuild inspects what the backend holds under the
// snapshot id and keeps what is usable: an active snapshot is reused, an inactive one
// re-activated, a failed one replaced. Ensure then must not delete it first, or a
// re-activation (cheap) would become a rebuild (slow).
type reuser interface {
	ReusesSnapshots() bool
}

// Ensure makes sure a snapshot for req.Spec exists or is being built, and returns its
// row without waiting. req.Base is the snapshot the build starts from; req.ID is set
// here, from the spec's build hash.
func (c *Coordinator) Ensure(ctx context.Context, req sandbox.BuildRequest) (store.Snapshot, error) {
	spec, base := req.Spec, req.Base
	hash := spec.BuildHash()
	id := sandbox.SnapshotID(hash)
	req.ID = id
	specJSON, _ := json.Marshal(spec)
	claimed, cur, err := c.Store.ClaimSnapshot(ctx, store.Snapshot{
		ID: id, Provider: c.Provider, BuildHash: hash, Base: base, Spec: string(specJSON),
	}, sandbox.StatusBuilding, sandbox.StatusFailed)
	if err != nil {
		return cur, err
	}
	// Logged for Terraform (TF_LOG_PROVIDER); a no-op in the harness, whose contexts
	// carry no Terraform logger.
	tflog.Debug(ctx, "build: snapshot claimed", map[string]any{
		"snapshot_id": id, "sandbox_provider": c.Provider, "claimed": claimed, "status": cur.Status, "build_hash": hash,
	})
	if !claimed && cur.Status == store.SnapshotCollecting {
		// Garbage collection is removing it: once it is gone, claim it again (and so
		// build it anew).
		if err := c.awaitCollection(ctx, cur); err != nil {
			return cur, err
		}
		return c.Ensure(ctx, req)
	}
	if !claimed {
		// Someone else built or is building it. If the row says Ready but the backend lost
		// the snapshot (deleted out of band), take it over and build again; unless its
		// files are on another machine, where this builder cannot see them.
		if cur.Status == sandbox.StatusReady {
			if _, err := c.Builder.BuildState(ctx, id); errors.Is(err, sandbox.ErrNotFound) && !c.elsewhere(ctx, id) {
				// ErrNotFound: garbage collection took it meanwhile; Ensure again waits
				// for that.
				if err := c.Store.SetSnapshotState(ctx, id, sandbox.StatusFailed, "snapshot was deleted outside trueforge", ""); err != nil && !errors.Is(err, store.ErrNotFound) {
					return cur, err
				}
				return c.Ensure(ctx, req)
			}
		}
		return cur, nil
	}
	if err := c.recordPlace(ctx, id); err != nil {
		return cur, err
	}
	// A failed build's leftovers must go before the new attempt, unless the backend's
	// StartBuild sorts out what it holds under the id itself (reuse, re-activate, replace).
	if r, ok := c.Builder.(reuser); !ok || !r.ReusesSnapshots() {
		if err := c.Builder.DeleteSnapshot(ctx, id); err != nil {
			return cur, fmt.Errorf("clearing the previous attempt of snapshot %s: %w", id, err)
		}
	}
	if err := c.Builder.StartBuild(ctx, req); err != nil {
		_ = c.Store.SetSnapshotState(context.WithoutCancel(ctx), id, sandbox.StatusFailed, "starting the build: "+err.Error(), "")
		return cur, fmt.Errorf("starting the build of snapshot %s: %w", id, err)
	}
	tflog.Info(ctx, "build: started", map[string]any{"snapshot_id": id, "sandbox_provider": c.Provider, "base": base, "block_network": req.BlockNetwork})
	return cur, nil
}

// collectedRetries bounds how often Use claims a snapshot again because garbage
// collection took it between the claim and the save: each time needs another apply to
// have left the same build inputs at that very moment.
const collectedRetries = 5

// Use makes sure a snapshot for req.Spec exists or is being built, as Ensure, and saves the
// environment that references it with save, which points the environment at the
// snapshot in the store. When the snapshot was collected between the claim and the save
// (store.ErrSnapshotCollected: an apply that left these inputs collected it just then),
// it claims it again, which builds it anew, and saves again. It returns the snapshot
// and, apart, what save returned, so that callers can tell a failed build start from a
// failed save.
func (c *Coordinator) Use(ctx context.Context, req sandbox.BuildRequest, save func(store.Snapshot) error) (snap store.Snapshot, saveErr, err error) {
	for attempt := 1; ; attempt++ {
		snap, err = c.Ensure(ctx, req)
		if err != nil {
			return snap, nil, err
		}
		saveErr = save(snap)
		if !errors.Is(saveErr, store.ErrSnapshotCollected) || attempt == collectedRetries {
			return snap, saveErr, nil
		}
	}
}

// awaitCollection waits until the snapshot that garbage collection is removing is gone.
// A collection that has not finished within startGrace of its start has lost its
// collector (the apply died between marking and removing): the snapshot is turned to
// Failed, which the next claim rebuilds.
func (c *Coordinator) awaitCollection(ctx context.Context, snap store.Snapshot) error {
	poll := c.pollInterval()
	for {
		if time.Since(snap.UpdatedAt) >= startGrace {
			_, err := c.Store.ReclaimStaleCollection(ctx, snap.ID, time.Now().Add(-startGrace), sandbox.StatusFailed)
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("snapshot %s was still being collected when the wait ended: %w", snap.ID, context.Cause(ctx))
		case <-time.After(poll):
		}
		if poll < time.Second {
			poll *= 2
		}
		// Another process removes it: read the database, past the config cache.
		cur, err := c.Store.Fresh().GetSnapshot(ctx, snap.ID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur.Status != store.SnapshotCollecting {
			return nil
		}
		snap = cur
	}
}

func (c *Coordinator) pollInterval() time.Duration {
	if c.Poll <= 0 {
		return 50 * time.Millisecond
	}
	return c.Poll
}

// Refresh brings the stored state of snapshot id up to date with the backend and returns
// it. A snapshot the backend no longer has becomes Failed, so the next plan rebuilds it.
func (c *Coordinator) Refresh(ctx context.Context, id string) (store.Snapshot, error) {
	snap, err := c.Store.GetSnapshot(ctx, id)
	if err != nil {
		return snap, err
	}
	if snap.Status == sandbox.StatusFailed {
		return snap, nil
	}
	st, err := c.Builder.BuildState(ctx, id)
	switch {
	case errors.Is(err, sandbox.ErrNotFound) && snap.Status == sandbox.StatusBuilding && time.Since(snap.UpdatedAt) < startGrace:
		// Claimed a moment ago by another apply that is about to start the build.
		return snap, nil
	case errors.Is(err, sandbox.ErrNotFound) && c.elsewhere(ctx, id):
		// Built, or building, on another machine: this builder cannot see it, and the row
		// is the best word on it (the harness there refuses it if it is gone).
		return snap, nil
	case errors.Is(err, sandbox.ErrNotFound):
		reason := "snapshot was deleted outside trueforge"
		if snap.Status == sandbox.StatusBuilding {
			reason = "the build never started or its files were removed"
		}
		st = sandbox.BuildState{Status: sandbox.StatusFailed, Reason: reason}
	case err != nil:
		return snap, fmt.Errorf("checking the build of snapshot %s: %w", id, err)
	}
	if st.Status != snap.Status || st.Reason != snap.Reason {
		if err := c.Store.SetSnapshotState(ctx, id, st.Status, st.Reason, st.LogTail); err != nil {
			return snap, err
		}
		snap.Status, snap.Reason, snap.LogTail = st.Status, st.Reason, st.LogTail
		if snap.Status == sandbox.StatusReady {
			c.recordManifest(ctx, id) // manifest.go
		}
	}
	return snap, nil
}

// Wait polls snapshot id until it is Ready or Failed, or ctx ends. The build goes on
// after a timeout; the returned error says so.
//
// The build it waits for may be another process's, which records the outcome in the
// store (a failure to start it has no trace in the backend at all): every poll reads the
// database, past the provider's config cache (store.Fresh).
func (c *Coordinator) Wait(ctx context.Context, id string) (store.Snapshot, error) {
	fresh := *c
	fresh.Store = c.Store.Fresh()
	return fresh.wait(ctx, id)
}

func (c *Coordinator) wait(ctx context.Context, id string) (store.Snapshot, error) {
	poll := c.pollInterval()
	start := time.Now()
	tflog.Debug(ctx, "build: waiting", map[string]any{"snapshot_id": id, "sandbox_provider": c.Provider})
	for {
		snap, err := c.Refresh(ctx, id)
		if err != nil {
			return snap, err
		}
		if snap.Status != sandbox.StatusBuilding {
			fields := map[string]any{"snapshot_id": id, "status": snap.Status, "waited": time.Since(start).String()}
			if snap.Status == sandbox.StatusFailed {
				fields["reason"] = snap.Reason
			}
			tflog.Info(ctx, "build: finished", fields)
			return snap, nil
		}
		select {
		case <-ctx.Done():
			tflog.Warn(ctx, "build: wait ended while building", map[string]any{"snapshot_id": id, "waited": time.Since(start).String()})
			return snap, fmt.Errorf("snapshot %s is still Building when the wait ended (%w); the build goes on and a later apply or refresh picks up its result", id, context.Cause(ctx))
		case <-time.After(poll):
		}
		if poll < time.Second {
			poll *= 2
		}
	}
}

// Collect removes snapshots that no environment, provider or other snapshot refers to.
// It returns the ids it removed. Each is first marked Collecting, in a transaction that
// checks again that nothing refers to it (another apply may have just claimed it for an
// environment: then it stays), so that no apply reuses it while its files go (see
// store.MarkSnapshotCollecting).
func (c *Coordinator) Collect(ctx context.Context) ([]string, error) {
	ids, err := c.Store.UnreferencedSnapshots(ctx, c.Provider)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, id := range ids {
		marked, err := c.Store.MarkSnapshotCollecting(ctx, id)
		if err != nil {
			return removed, err
		}
		if !marked {
			continue
		}
		tflog.Debug(ctx, "collect: removing unreferenced snapshot", map[string]any{"snapshot_id": id, "sandbox_provider": c.Provider})
		if err := c.Builder.DeleteSnapshot(ctx, id); err != nil {
			// Failed, it is rebuilt when claimed, and collected by a later apply.
			_ = c.Store.AbandonCollection(context.WithoutCancel(ctx), id, sandbox.StatusFailed, "removing it as unreferenced failed: "+err.Error())
			return removed, fmt.Errorf("removing unreferenced snapshot %s: %w", id, err)
		}
		if err := c.Store.DeleteCollectedSnapshot(ctx, id); err != nil {
			return removed, err
		}
		removed = append(removed, id)
	}
	if len(ids) > 0 {
		tflog.Info(ctx, "collect: unreferenced snapshots removed", map[string]any{"sandbox_provider": c.Provider, "removed": removed})
	}
	return removed, nil
}

// RemoveFiles deletes the backend side of snapshots whose rows are already gone (after
// the provider itself was deleted).
func (c *Coordinator) RemoveFiles(ctx context.Context, ids []string) error {
	var errs []error
	for _, id := range ids {
		if err := c.Builder.DeleteSnapshot(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// recordPlace records where this builder puts the files of snapshot id, when its
// snapshots are files on a machine (sandbox.Placed: the local backend, whose
// Capabilities.RemoteSnapshots is false), so that a harness on another machine refuses
// the snapshot with a message naming it and its host. It runs when a build is claimed:
// the claimer is the one that builds.
func (c *Coordinator) recordPlace(ctx context.Context, id string) error {
	pl, ok := c.Builder.(sandbox.Placed)
	if !ok {
		return nil
	}
	return c.Store.SetSnapshotHost(ctx, id, pl.SnapshotPlace().Encode())
}

// elsewhere reports whether snapshot id's files are recorded at a place this builder does
// not reach (another machine, or another directory): its "not found" then says nothing
// about the snapshot. It reads the store only on that rare path.
func (c *Coordinator) elsewhere(ctx context.Context, id string) bool {
	pl, ok := c.Builder.(sandbox.Placed)
	if !ok {
		return false
	}
	recorded, err := c.Store.SnapshotHost(ctx, id)
	if err != nil {
		return false
	}
	p, ok := sandbox.ParsePlace(recorded)
	return ok && !pl.SnapshotPlace().Reaches(p)
}
