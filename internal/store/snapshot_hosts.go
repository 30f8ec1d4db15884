package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// The host of a snapshot (column snapshots.host, migration 7) says where the files of a
// snapshot are, for a backend that keeps snapshots as files on a machine (the local
// backend): the builds package records it when it claims a build, and the harness reads
// it before provisioning, to refuse a snapshot whose files are on another machine with a
// message rather than fail to find them. Its text is the backend's (sandbox.Place); ""
// means unrecorded (a remote backend, or a build from before the column).

// SetSnapshotHost records where snapshot id's files are.
func (s *Store) SetSnapshotHost(ctx context.Context, id, host string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE snapshots SET host = ? WHERE id = ?`, host, id)
	if err != nil {
		return fmt.Errorf("recording the host of snapshot %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	}
	return nil
}

// SnapshotHost reads where snapshot id's files are ("" when unrecorded).
func (s *Store) SnapshotHost(ctx context.Context, id string) (string, error) {
	var host string
	err := s.db.QueryRowContext(ctx, `SELECT host FROM snapshots WHERE id = ?`, id).Scan(&host)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("reading the host of snapshot %s: %w", id, err)
	}
	return host, nil
}
