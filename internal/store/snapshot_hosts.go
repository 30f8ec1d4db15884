package store

import (
	"context"
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
	return changedOne(res, err, "recording the host of", "snapshot %s", id)
}

// SnapshotHost reads where snapshot id's files are ("" when unrecorded).
func (s *Store) SnapshotHost(ctx context.Context, id string) (string, error) {
	var host string
	err := s.db.QueryRowContext(ctx, `SELECT host FROM snapshots WHERE id = ?`, id).Scan(&host)
	return found(host, err, "reading the host of", "snapshot %s", id)
}
