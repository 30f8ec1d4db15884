package store

import (
	"context"
	"encoding/json"
)

// migrationVolumeSize (15) gives each volume a size (GB: what the backend caps it at,
// where it can) and its owner's consent to other owners' environments mounting it
// (shared_with: a JSON array of owner names, "*" for everyone; UsableBy). A volume of
// an earlier release is its owner's alone ('[]') and 10 GB (DefaultVolumeSizeGB), which
// its backend enforces only once the volume is made again (the local backend's
// directory of an earlier release has no image).
//
// On PostgreSQL a restrictive policy on environments makes the database refuse a row,
// inserted or updated, whose settings mount a volume its owner may not use (or one that
// does not exist): a team writing its environment's settings by hand gets no further
// than the provider would let it. It decides by migration 14's trueforge_usable_by
// (store.UsableBy in SQL). The volumes are read as the writing role: every team reads
// every volume (migration 12), so the check sees them all. An environment that mounts a
// volume whose owner stops sharing it keeps its row, but cannot be written again until
// it drops the volume, and the harness refuses its sandboxes (lifecycle/volumes.go):
// new ones, and, by the volume names each session's sandbox records (session_sandboxes
// .volumes, '[]' for a sandbox of an earlier release), the reuse of existing ones.
var migrationVolumeSize = migration{sql: volumeSizeSQL, postgres: volumeSizePostgres}

const volumeSizeSQL = `
ALTER TABLE volumes ADD COLUMN size BIGINT NOT NULL DEFAULT 10;
ALTER TABLE volumes ADD COLUMN shared_with TEXT NOT NULL DEFAULT '[]';
ALTER TABLE session_sandboxes ADD COLUMN volumes TEXT NOT NULL DEFAULT '[]';
`

// volumeSizePostgres: SET search_path FROM CURRENT binds "volumes" to the schema the
// migration ran in, whatever the writing session's search_path says; the body names its
// arguments by position, as migration 14's functions do (a column would win over an
// argument's name).
const volumeSizePostgres = `
ALTER TABLE volumes ADD COLUMN size BIGINT NOT NULL DEFAULT 10;
ALTER TABLE volumes ADD COLUMN shared_with TEXT NOT NULL DEFAULT '[]'
	CHECK (jsonb_typeof(shared_with::jsonb) = 'array');
ALTER TABLE session_sandboxes ADD COLUMN volumes TEXT NOT NULL DEFAULT '[]';

-- Whether owner $1's environment with settings $2 mounts only volumes $1 may use.
CREATE FUNCTION trueforge_volumes_usable(env_owner TEXT, settings TEXT) RETURNS BOOLEAN
	LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
	SELECT NOT EXISTS (
		SELECT 1
		FROM json_array_elements(CASE WHEN json_typeof($2::json -> 'volumes') = 'array' THEN $2::json -> 'volumes' ELSE '[]'::json END) AS m(v)
		LEFT JOIN volumes ON volumes.name = m.v ->> 'volume'
		WHERE volumes.name IS NULL OR NOT trueforge_usable_by(volumes.owner, volumes.shared_with, $1)
	)
$$;
CREATE POLICY environments_volumes_insert ON environments AS RESTRICTIVE FOR INSERT
	WITH CHECK (trueforge_volumes_usable(owner, settings));
CREATE POLICY environments_volumes_update ON environments AS RESTRICTIVE FOR UPDATE
	WITH CHECK (trueforge_volumes_usable(owner, settings));
`

// Bounds of a volume's size, in GB, the same on every backend: DefaultVolumeSizeGB when
// unset; at most MaxVolumeSizeGB (the local backend's image is sparse, so the bound is
// on what a sandbox may fill, not on what the volume costs until then).
const (
	DefaultVolumeSizeGB = 10
	MinVolumeSizeGB     = 1
	MaxVolumeSizeGB     = 1024
)

// UpdateVolume changes what a volume's owner may change in place: its size (the backend
// was resized first, where it keeps one) and whom it is shared with.
func (s *Store) UpdateVolume(ctx context.Context, name string, sizeGB int64, sharedWith []string) error {
	shared, err := encodeSharedWith(sharedWith)
	if err != nil {
		return err
	}
	res, err := s.db.ExecContext(ctx, `UPDATE volumes SET size = ?, shared_with = ?, updated_at = ? WHERE name = ?`, sizeGB, shared, s.stamp(), name)
	return changedOne(res, err, "updating", "volume %q", name)
}

// encodeSharedWith is the shared_with column's JSON array ("[]" for none).
func encodeSharedWith(sharedWith []string) (string, error) {
	if sharedWith == nil {
		sharedWith = []string{}
	}
	b, err := json.Marshal(sharedWith)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// decodeSharedWith reads the shared_with column; a document that is not an array of
// strings shares with nobody.
func decodeSharedWith(doc string) []string {
	var out []string
	if json.Unmarshal([]byte(doc), &out) != nil {
		return nil
	}
	return out
}
