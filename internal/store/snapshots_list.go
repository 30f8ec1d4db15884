package store

import (
	"context"
	"fmt"
)

// ListSnapshots lists every snapshot of the control plane, ordered by sandbox provider
// and id (snapshots are shared: every role reads them all), for the trueforge_snapshots
// data source.
func (s *Store) ListSnapshots(ctx context.Context) ([]Snapshot, error) {
	snaps, err := queryRows(ctx, s.db, scanSnapshot, snapshotSelect+` ORDER BY provider, id`)
	if err != nil {
		return nil, fmt.Errorf("listing snapshots: %w", err)
	}
	return snaps, nil
}

// SnapshotManifestDigests maps each snapshot that has a stored manifest to the
// manifest's digest, without reading the manifests themselves.
func (s *Store) SnapshotManifestDigests(ctx context.Context) (map[string]string, error) {
	type pair struct{ id, digest string }
	rows, err := queryRows(ctx, s.db, func(sc scanner) (pair, error) {
		var p pair
		err := sc.Scan(&p.id, &p.digest)
		return p, err
	}, `SELECT snapshot_id, digest FROM snapshot_manifests`)
	if err != nil {
		return nil, fmt.Errorf("listing snapshot manifest digests: %w", err)
	}
	out := make(map[string]string, len(rows))
	for _, p := range rows {
		out[p.id] = p.digest
	}
	return out, nil
}
