package store

import (
	"context"
	"fmt"
)

// ListVolumes lists every volume this connection may read, ordered by name (on
// PostgreSQL every team reads them all: migration 12), for the trueforge_volume list
// resource.
func (s *Store) ListVolumes(ctx context.Context) ([]Volume, error) {
	vols, err := queryRows(ctx, s.db, scanVolume, volumeSelect+` ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("listing volumes: %w", err)
	}
	return vols, nil
}
