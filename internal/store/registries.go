package store

import (
	"context"
	"database/sql"
)

// Registry is a trueforge_registry: a private container registry of a sandbox provider
// (its table is made by migration 12, volumes.go). The password is sealed by the caller
// (package secretbox); the store never sees plaintext.
type Registry struct {
	Name        string
	Provider    string
	Owner       string
	URL         string
	Username    string
	PasswordEnc []byte
	Project     string
	// RemoteID is the backend's id of the registry.
	RemoteID string
	// Version is bumped on every password rotation.
	Version int64
}

// CreateRegistry stores a new registry.
func (s *Store) CreateRegistry(ctx context.Context, r Registry) error {
	return s.createAs(ctx, r.Owner, func(tx *txn, now int64) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO registries(name, provider, owner, url, username, password_enc, project, remote_id, version, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`,
			r.Name, r.Provider, r.Owner, r.URL, r.Username, r.PasswordEnc, r.Project, r.RemoteID, now, now)
		return inserted(err, notFound("sandbox provider %q", r.Provider), "registry %q", r.Name)
	})
}

// GetRegistry reads a registry by name.
func (s *Store) GetRegistry(ctx context.Context, name string) (Registry, error) {
	return getRow(ctx, s, (*configSnapshot).registry, scanRegistry, registrySelect+` WHERE name = ?`, name, "registry %q")
}

// registrySelect reads registries; scanRegistry scans one of its rows.
const registrySelect = `SELECT name, provider, owner, url, username, password_enc, project, remote_id, version FROM registries`

func scanRegistry(sc scanner) (Registry, error) {
	var r Registry
	err := sc.Scan(&r.Name, &r.Provider, &r.Owner, &r.URL, &r.Username, &r.PasswordEnc, &r.Project, &r.RemoteID, &r.Version)
	return r, err
}

// UpdateRegistry replaces a registry's URL, username, project and backend id and, when
// passwordEnc is not nil, rotates its password.
func (s *Store) UpdateRegistry(ctx context.Context, r Registry, passwordEnc []byte) error {
	var res sql.Result
	var err error
	if passwordEnc != nil {
		res, err = s.db.ExecContext(ctx, `UPDATE registries SET url = ?, username = ?, project = ?, remote_id = ?, password_enc = ?, version = version + 1, updated_at = ? WHERE name = ?`,
			r.URL, r.Username, r.Project, r.RemoteID, passwordEnc, s.stamp(), r.Name)
	} else {
		res, err = s.db.ExecContext(ctx, `UPDATE registries SET url = ?, username = ?, project = ?, remote_id = ?, updated_at = ? WHERE name = ?`,
			r.URL, r.Username, r.Project, r.RemoteID, s.stamp(), r.Name)
	}
	return changedOne(res, err, "updating", "registry %q", r.Name)
}

// EnvironmentsUsingRegistry lists the environments whose image pulls from a registry.
func (s *Store) EnvironmentsUsingRegistry(ctx context.Context, name string) ([]string, error) {
	return environmentsUsing(ctx, s.db, pullsFrom(name))
}

// pullsFrom is whether an environment's settings pull its image from registry name.
func pullsFrom(name string) func(EnvironmentSettings) bool {
	return func(st EnvironmentSettings) bool { return st.Registry == name }
}

// DeleteRegistry removes a registry. It fails with ErrInUse, naming them, while
// environments (any owner's) pull from it.
func (s *Store) DeleteRegistry(ctx context.Context, name string) error {
	return s.deleteUnused(ctx, "registries", "registry", "is used by", name, pullsFrom(name))
}
