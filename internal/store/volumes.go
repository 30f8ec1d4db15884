package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// migrationVolumesRegistries (12): volumes and private registries (issue 17), objects of
// a sandbox provider that outlive sandboxes. Each row keeps the backend's id of the
// object (remote_id: Daytona's volume or docker registry id, the local backend's
// directory name); a registry's password is sealed with the secret box like an API key.
// Environments name them in their settings document (environment_settings.go), so a
// volume or registry in use is found by reading those, in the delete's transaction. On
// PostgreSQL every team reads them all (an environment may mount another team's volume
// that team shares with it: migration 15) and writes its own rows, as with environments
// (migration 8).
var migrationVolumesRegistries = migration{sql: volumesSQL, postgres: pgTypes(volumesSQL) + volumesPolicies}

const volumesSQL = `
CREATE TABLE volumes (
	name       TEXT PRIMARY KEY,
	provider   TEXT NOT NULL REFERENCES sandbox_providers(name),
	owner      TEXT NOT NULL REFERENCES owners(name),
	remote_id  TEXT NOT NULL DEFAULT '',
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE TABLE registries (
	name         TEXT PRIMARY KEY,
	provider     TEXT NOT NULL REFERENCES sandbox_providers(name),
	owner        TEXT NOT NULL REFERENCES owners(name),
	url          TEXT NOT NULL,
	username     TEXT NOT NULL,
	password_enc BLOB NOT NULL,
	project      TEXT NOT NULL DEFAULT '',
	remote_id    TEXT NOT NULL DEFAULT '',
	version      BIGINT NOT NULL DEFAULT 1,
	created_at   BIGINT NOT NULL,
	updated_at   BIGINT NOT NULL
);
`

var volumesPolicies = "\n" + ownedRows("volumes") + "\n" + ownedRows("registries")

// Volume is a trueforge_volume: a named volume of a sandbox provider.
type Volume struct {
	Name     string
	Provider string
	Owner    string
	// RemoteID is the backend's id of the volume (sandbox.VolumeMount.Volume).
	RemoteID string
	// SizeGB is the volume's size (migration 15); 0 in a row written before reads as
	// DefaultVolumeSizeGB.
	SizeGB int64
	// SharedWith are the owners, besides Owner, whose environments may mount it
	// (ShareAll: every owner); UsableBy decides.
	SharedWith []string
}

// UsableBy reports whether owner who's environments may mount the volume.
func (v Volume) UsableBy(who string) bool { return UsableBy(v.Owner, v.SharedWith, who) }

// CreateVolume stores a new volume.
func (s *Store) CreateVolume(ctx context.Context, v Volume) error {
	return s.createAs(ctx, v.Owner, func(tx *txn, now int64) error {
		shared, err := encodeSharedWith(v.SharedWith)
		if err != nil {
			return err
		}
		size := v.SizeGB
		if size == 0 {
			size = DefaultVolumeSizeGB
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO volumes(name, provider, owner, remote_id, size, shared_with, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			v.Name, v.Provider, v.Owner, v.RemoteID, size, shared, now, now)
		return inserted(err, notFound("sandbox provider %q", v.Provider), "volume %q", v.Name)
	})
}

// GetVolume reads a volume by name.
func (s *Store) GetVolume(ctx context.Context, name string) (Volume, error) {
	return getRow(ctx, s, (*configSnapshot).volume, scanVolume, volumeSelect+` WHERE name = ?`, name, "volume %q")
}

// volumeSelect reads volumes; scanVolume scans one of its rows.
const volumeSelect = `SELECT name, provider, owner, remote_id, size, shared_with FROM volumes`

func scanVolume(sc scanner) (Volume, error) {
	var v Volume
	var shared string
	err := sc.Scan(&v.Name, &v.Provider, &v.Owner, &v.RemoteID, &v.SizeGB, &shared)
	v.SharedWith = decodeSharedWith(shared)
	return v, err
}

// SetVolumeRemoteID records the backend's id of a volume (after it was made again).
func (s *Store) SetVolumeRemoteID(ctx context.Context, name, remoteID string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE volumes SET remote_id = ?, updated_at = ? WHERE name = ?`, remoteID, s.stamp(), name)
	return changedOne(res, err, "updating", "volume %q", name)
}

// EnvironmentsUsingVolume lists the environments that mount a volume, every owner's.
func (s *Store) EnvironmentsUsingVolume(ctx context.Context, name string) ([]string, error) {
	return environmentsUsing(ctx, s.db, mounts(name))
}

// mounts is whether an environment's settings mount volume name.
func mounts(name string) func(EnvironmentSettings) bool {
	return func(st EnvironmentSettings) bool {
		return slices.ContainsFunc(st.Volumes, func(v EnvironmentVolume) bool { return v.Volume == name })
	}
}

// environmentsUsing lists the environments whose settings match uses. The settings are
// a JSON document, read whole: one query over every environment, the same on both
// databases.
func environmentsUsing(ctx context.Context, q querier, uses func(EnvironmentSettings) bool) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT name, settings FROM environments ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("reading environments' settings: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name, doc string
		if err := rows.Scan(&name, &doc); err != nil {
			return nil, err
		}
		var st EnvironmentSettings
		if json.Unmarshal([]byte(doc), &st) == nil && uses(st) {
			out = append(out, name)
		}
	}
	return out, rows.Err()
}

// DeleteVolume removes a volume. It fails with ErrInUse, naming them, while environments
// (any owner's) mount it: the check and the delete are one transaction.
func (s *Store) DeleteVolume(ctx context.Context, name string) error {
	return s.deleteUnused(ctx, "volumes", "volume", "is mounted by", name, mounts(name))
}

// deleteUnused deletes the row name of table, a noun ("volume") that environments use
// as uses says, in one transaction with the check that none does: ErrInUse naming them
// (the noun "is mounted by" them, as how says) while any does.
func (s *Store) deleteUnused(ctx context.Context, table, noun, how, name string, uses func(EnvironmentSettings) bool) error {
	return s.inTx(ctx, func(tx *txn) error {
		users, err := environmentsUsing(ctx, tx, uses)
		if err != nil {
			return err
		}
		if len(users) > 0 {
			return fmt.Errorf("%s %q %s environment(s) %s: %w", noun, name, how, strings.Join(users, ", "), ErrInUse)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE name = ?`, name)
		return changedOne(res, err, "deleting", noun+" %q", name)
	})
}
