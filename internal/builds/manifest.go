package builds

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/trueforge/terraform-provider-trueforge/internal/manifest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Manifester is a SnapshotBuilder that can say what a Ready snapshot contains (its
// package manifest), by reading the snapshot's package databases as files. The local
// backend reads the snapshot's layers directly; Daytona runs a reader in a short-lived
// sandbox of the snapshot.
type Manifester interface {
	Manifest(ctx context.Context, snapshotID string) (manifest.Manifest, error)
}

// manifestFailed remembers, per process, the snapshots whose manifest could not be
// taken, so that every later Refresh (each plan reads each environment) does not try
// again; the next process does.
var manifestFailed sync.Map

// recordManifest takes and stores the manifest of Ready snapshot id when the builder
// can take one and none is stored yet. Refresh calls it when it sees a build turn Ready
// (every Ready row got there through one such refresh), so a plan that only reads
// environments costs no query for it; Manifest calls it for a snapshot that has none
// (built before manifests existed, or whose extraction failed). A failure is logged and
// leaves the snapshot usable: a manifest describes a snapshot, it does not gate it.
func (c *Coordinator) recordManifest(ctx context.Context, id string) {
	mf, ok := c.Builder.(Manifester)
	if !ok {
		return
	}
	key := c.Provider + "/" + id
	if _, failed := manifestFailed.Load(key); failed {
		return
	}
	if has, err := c.Store.HasSnapshotManifest(ctx, id); err != nil || has {
		return
	}
	start := time.Now()
	m, err := mf.Manifest(ctx, id)
	took := time.Since(start)
	if err == nil {
		err = c.Store.PutSnapshotManifest(ctx, id, m, took)
	}
	if err != nil {
		manifestFailed.Store(key, struct{}{})
		tflog.Warn(ctx, "build: the snapshot's package manifest was not recorded", map[string]any{
			"snapshot_id": id, "sandbox_provider": c.Provider, "error": err.Error()})
		return
	}
	tflog.Info(ctx, "build: package manifest recorded", map[string]any{
		"snapshot_id": id, "digest": m.Digest(), "packages": len(m.Packages), "bytes": len(m.JSON()),
		"omitted": m.Omitted, "took": took.String()})
}

// Manifest returns the stored manifest of snapshot id, taking it first when the
// snapshot is Ready and none is stored (store.ErrNotFound when none can be had).
func (c *Coordinator) Manifest(ctx context.Context, id string) (store.SnapshotManifest, error) {
	sm, err := c.Store.GetSnapshotManifest(ctx, id)
	if !errors.Is(err, store.ErrNotFound) {
		return sm, err
	}
	if snap, serr := c.Refresh(ctx, id); serr != nil || snap.Status != sandbox.StatusReady {
		return sm, err
	}
	c.recordManifest(ctx, id)
	return c.Store.GetSnapshotManifest(ctx, id)
}
