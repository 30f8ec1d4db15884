package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Snapshot is one content-addressed build of an environment's build inputs.
type Snapshot struct {
	ID        string
	Provider  string
	BuildHash string
	Base      string
	Spec      string // the JSON of the build inputs, for the record
	Status    string
	Reason    string
	LogTail   string
	Builds    int64 // how many times a build was started for this id
	UpdatedAt time.Time
}

// ClaimSnapshot makes sure a row for snap exists and decides who builds it. It returns
// claimed=true when the caller must start a build: the snapshot is new, or its last build
// failed. Otherwise it returns the current row, which another apply may still be building:
// identical build inputs are built once.
func (s *Store) ClaimSnapshot(ctx context.Context, snap Snapshot, building string, failed string) (claimed bool, cur Snapshot, err error) {
	err = s.inTx(ctx, func(tx *txn) error {
		now := s.stamp()
		res, err := tx.ExecContext(ctx, `INSERT INTO snapshots(id, provider, build_hash, base, spec, status, builds, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?) ON CONFLICT(id) DO NOTHING`,
			snap.ID, snap.Provider, snap.BuildHash, snap.Base, snap.Spec, building, now, now)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			claimed = true
		} else {
			res, err = tx.ExecContext(ctx, `UPDATE snapshots SET status = ?, reason = '', log_tail = '', builds = builds + 1, updated_at = ? WHERE id = ? AND status = ?`,
				building, now, snap.ID, failed)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			claimed = n == 1
		}
		if claimed {
			if _, err := tx.ExecContext(ctx, `INSERT INTO counters(name, value) VALUES ('builds_started', 1)
				ON CONFLICT(name) DO UPDATE SET value = counters.value + 1`); err != nil {
				return err
			}
		}
		cur, err = getSnapshot(ctx, tx, snap.ID)
		return err
	})
	if err != nil {
		return false, cur, fmt.Errorf("claiming snapshot %s: %w", snap.ID, err)
	}
	return claimed, cur, nil
}

// SetSnapshotState records the outcome (or progress) of a build. A snapshot that garbage
// collection is removing (SnapshotCollecting) is not changed: ErrNotFound.
func (s *Store) SetSnapshotState(ctx context.Context, id, status, reason, logTail string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE snapshots SET status = ?, reason = ?, log_tail = ?, updated_at = ? WHERE id = ? AND status <> ?`,
		status, reason, logTail, s.stamp(), id, SnapshotCollecting)
	return changedOne(res, err, "recording the state of", "snapshot %s", id)
}

// GetSnapshot reads one snapshot.
func (s *Store) GetSnapshot(ctx context.Context, id string) (Snapshot, error) {
	if c := s.config(ctx); c != nil {
		if sn, ok := c.snapshot(id); ok {
			return sn, nil
		}
	}
	return getSnapshot(ctx, s.db, id)
}

func getSnapshot(ctx context.Context, q querier, id string) (Snapshot, error) {
	sn, err := scanSnapshot(q.QueryRowContext(ctx, snapshotSelect+` WHERE id = ?`, id))
	return found(sn, err, "reading", "snapshot %s", id)
}

const snapshotSelect = `SELECT id, provider, build_hash, base, spec, status, reason, log_tail, builds, updated_at FROM snapshots`

func scanSnapshot(sc scanner) (Snapshot, error) {
	var sn Snapshot
	var updated int64
	if err := sc.Scan(&sn.ID, &sn.Provider, &sn.BuildHash, &sn.Base, &sn.Spec, &sn.Status, &sn.Reason, &sn.LogTail, &sn.Builds, &updated); err != nil {
		return sn, err
	}
	sn.UpdatedAt = time.UnixMilli(updated)
	return sn, nil
}

// CountBuilds is the number of snapshot builds ever started in this control plane: the
// figure that shows identical inputs built once.
func (s *Store) CountBuilds(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT value FROM counters WHERE name = 'builds_started'`).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// UnreferencedSnapshots lists snapshots of a provider that no environment points at or
// keeps as a version, nor any agent pins (keptSnapshotIDs), and that are not its release
// snapshot: the ones garbage collection may remove. A build in
// progress is never listed, since its environment row may not be written yet.
func (s *Store) UnreferencedSnapshots(ctx context.Context, provider string) ([]string, error) {
	ids, err := queryRows(ctx, s.db, scanString, `SELECT s.id FROM snapshots s
		WHERE s.provider = ? AND s.status <> 'Building'
		  AND s.id NOT IN (SELECT snapshot_id FROM environments)
		  AND s.id NOT IN (`+keptSnapshotIDs+`)
		  AND s.id NOT IN (SELECT release_snapshot FROM sandbox_providers)
		  AND s.id NOT IN (SELECT base FROM snapshots)
		ORDER BY s.id`, provider)
	if err != nil {
		return nil, fmt.Errorf("listing unreferenced snapshots: %w", err)
	}
	return ids, nil
}

// DeleteSnapshot removes a snapshot row; a missing row is not an error.
func (s *Store) DeleteSnapshot(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM snapshots WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("deleting snapshot %s: %w", id, err)
	}
	return nil
}

// RegisterReleaseSnapshot records a provider's release snapshot, which the backend built
// synchronously, as Ready.
func (s *Store) RegisterReleaseSnapshot(ctx context.Context, provider, id string) error {
	now := s.stamp()
	_, err := s.db.ExecContext(ctx, `INSERT INTO snapshots(id, provider, build_hash, base, spec, status, builds, created_at, updated_at)
		VALUES (?, ?, '', '', '{"image":"platform"}', 'Ready', 0, ?, ?) ON CONFLICT(id) DO UPDATE SET status = 'Ready', updated_at = excluded.updated_at`,
		id, provider, now, now)
	if err != nil {
		return fmt.Errorf("recording release snapshot %s: %w", id, err)
	}
	return nil
}

// ListSnapshotIDs lists every snapshot of a provider.
func (s *Store) ListSnapshotIDs(ctx context.Context, provider string) ([]string, error) {
	return queryRows(ctx, s.db, scanString, `SELECT id FROM snapshots WHERE provider = ? ORDER BY id`, provider)
}
