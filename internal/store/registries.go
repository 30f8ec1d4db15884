package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
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
	return s.inTx(ctx, func(tx *txn) error {
		now := s.stamp()
		if err := ensureOwner(ctx, tx, r.Owner, now); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO registries(name, provider, owner, url, username, password_enc, project, remote_id, version, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`,
			r.Name, r.Provider, r.Owner, r.URL, r.Username, r.PasswordEnc, r.Project, r.RemoteID, now, now)
		switch {
		case isUnique(err):
			return fmt.Errorf("registry %q: %w", r.Name, ErrAlreadyExists)
		case isForeignKey(err):
			return fmt.Errorf("sandbox provider %q: %w", r.Provider, ErrNotFound)
		case err != nil:
			return fmt.Errorf("creating registry %q: %w", r.Name, err)
		}
		return nil
	})
}

// GetRegistry reads a registry by name.
func (s *Store) GetRegistry(ctx context.Context, name string) (Registry, error) {
	if c := s.config(ctx); c != nil {
		return c.registry(name)
	}
	var r Registry
	err := s.db.QueryRowContext(ctx, `SELECT name, provider, owner, url, username, password_enc, project, remote_id, version FROM registries WHERE name = ?`, name).
		Scan(&r.Name, &r.Provider, &r.Owner, &r.URL, &r.Username, &r.PasswordEnc, &r.Project, &r.RemoteID, &r.Version)
	return found(r, err, "reading", "registry %q", name)
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
	return environmentsUsing(ctx, s.db, func(st EnvironmentSettings) bool { return st.Registry == name })
}

// DeleteRegistry removes a registry. It fails with ErrInUse, naming them, while
// environments (any owner's) pull from it.
func (s *Store) DeleteRegistry(ctx context.Context, name string) error {
	return s.inTx(ctx, func(tx *txn) error {
		users, err := environmentsUsing(ctx, tx, func(st EnvironmentSettings) bool { return st.Registry == name })
		if err != nil {
			return err
		}
		if len(users) > 0 {
			return fmt.Errorf("registry %q is used by environment(s) %s: %w", name, strings.Join(users, ", "), ErrInUse)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM registries WHERE name = ?`, name)
		return changedOne(res, err, "deleting", "registry %q", name)
	})
}
