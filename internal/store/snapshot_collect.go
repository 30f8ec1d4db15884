package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Garbage collection of snapshots against applies that run at the same moment. An apply
// that reuses a Ready snapshot claims it (ClaimSnapshot) and saves its environment in
// two transactions; another apply may find the snapshot unreferenced in between. So a
// collector first marks the row Collecting, in a transaction that checks nothing refers
// to it, then removes the backend's files, then the row. While a row is Collecting it is
// never claimed (ClaimSnapshot leaves it be) and never referenced: saving an environment
// reads its snapshot's status in the saving transaction and refuses a Collecting or
// missing one with ErrSnapshotCollected, and the apply claims it again, which builds
// it anew once the collection is done. On PostgreSQL the marking and a save that run at
// once are a write skew (each reads what the other writes), which SERIALIZABLE refuses
// for one of them (retried by inTx); on SQLite they run one after the other.

// SnapshotCollecting is the status of a snapshot that garbage collection is removing.
const SnapshotCollecting = "Collecting"

// ErrSnapshotCollected means that an environment was to reference a snapshot that
// garbage collection took (or finished removing) after the snapshot was claimed: claim it
// again. It is also ErrNotFound when the row is gone.
var ErrSnapshotCollected = errors.New("snapshot was collected as unreferenced")

// MarkSnapshotCollecting claims snapshot id for garbage collection: it sets its status
// to Collecting when nothing refers to it (no environment, kept or pinned version
// (keptSnapshotIDs), sandbox provider or snapshot built on it) and it is neither
// Building nor already Collecting, and reports whether it did. The caller then removes the backend's files and the row (DeleteCollectedSnapshot).
// Nothing else changes a Collecting row: SetSnapshotState leaves it be.
func (s *Store) MarkSnapshotCollecting(ctx context.Context, id string) (bool, error) {
	var marked bool
	err := s.inTx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE snapshots SET status = ?, updated_at = ?
			WHERE id = ? AND status NOT IN ('Building', ?)
			  AND NOT EXISTS (SELECT 1 FROM environments e WHERE e.snapshot_id = ?)
			  AND ? NOT IN (`+keptSnapshotIDs+`)
			  AND NOT EXISTS (SELECT 1 FROM sandbox_providers p WHERE p.release_snapshot = ?)
			  AND NOT EXISTS (SELECT 1 FROM snapshots b WHERE b.base = ?)`,
			SnapshotCollecting, s.stamp(), id, SnapshotCollecting, id, id, id, id)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		marked = n == 1
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("marking snapshot %s for collection: %w", id, err)
	}
	return marked, nil
}

// DeleteCollectedSnapshot removes the row of a snapshot that MarkSnapshotCollecting
// marked, once its files are gone; a row that is not Collecting stays.
func (s *Store) DeleteCollectedSnapshot(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM snapshots WHERE id = ? AND status = ?`, id, SnapshotCollecting); err != nil {
		return fmt.Errorf("deleting collected snapshot %s: %w", id, err)
	}
	return nil
}

// AbandonCollection sets a Collecting snapshot to status failed with reason: its files
// could not all be removed. A later collection retries; a claim rebuilds it.
func (s *Store) AbandonCollection(ctx context.Context, id, failed, reason string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE snapshots SET status = ?, reason = ?, updated_at = ? WHERE id = ? AND status = ?`,
		failed, reason, s.stamp(), id, SnapshotCollecting); err != nil {
		return fmt.Errorf("recording the failed collection of snapshot %s: %w", id, err)
	}
	return nil
}

// ReclaimStaleCollection sets snapshot id to status failed when it has been Collecting
// since before cutoff: its collector died between marking it and removing it. It reports
// whether it did; the next claim then rebuilds it (and clears what the collector left).
func (s *Store) ReclaimStaleCollection(ctx context.Context, id string, cutoff time.Time, failed string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE snapshots SET status = ?, reason = 'its garbage collection did not finish', updated_at = ?
		WHERE id = ? AND status = ? AND updated_at < ?`, failed, s.stamp(), id, SnapshotCollecting, cutoff.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("taking over the collection of snapshot %s: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// snapshotUsable fails with ErrSnapshotCollected when snapshot id is being collected or
// is gone. The transactions that point an environment at a snapshot call it, so that
// their read of the status conflicts with a collection at the same moment.
func snapshotUsable(ctx context.Context, tx *txn, id string) error {
	var status string
	err := tx.QueryRowContext(ctx, `SELECT status FROM snapshots WHERE id = ?`, id).Scan(&status)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("snapshot %s: %w (%w)", id, ErrSnapshotCollected, ErrNotFound)
	case err != nil:
		return fmt.Errorf("reading snapshot %s: %w", id, err)
	case status == SnapshotCollecting:
		return fmt.Errorf("snapshot %s: %w", id, ErrSnapshotCollected)
	}
	return nil
}
