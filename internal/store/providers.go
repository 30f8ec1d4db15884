package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// SandboxProvider is a configured sandbox backend. There is one per control plane.
type SandboxProvider struct {
	Name            string
	Type            string
	APIURL          string
	Target          string
	APIKeyEnc       []byte // sealed with the secret box; nil when the type needs no key
	Scopes          []string
	ReleaseSnapshot string
	Status          string
	Owner           string
	// RequireLimits is the local backend's require_limits: refuse sandboxes whose limits
	// the host cannot enforce. Nil when unset: each process then decides by who it runs
	// as (local.RequireLimitsFor).
	RequireLimits *bool
}

// EnsureOwner records an owner the first time it is seen.
func ensureOwner(ctx context.Context, tx *txn, owner string, now int64) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO owners(name, created_at) VALUES (?, ?) ON CONFLICT(name) DO NOTHING`, owner, now)
	if err != nil {
		return fmt.Errorf("recording owner %q: %w", owner, err)
	}
	return nil
}

// createAs runs fn in a transaction that first records owner (ensureOwner), giving fn
// the time to stamp its rows with: how a row that belongs to its owner is created.
func (s *Store) createAs(ctx context.Context, owner string, fn func(tx *txn, now int64) error) error {
	return s.inTx(ctx, func(tx *txn) error {
		now := s.stamp()
		if err := ensureOwner(ctx, tx, owner, now); err != nil {
			return err
		}
		return fn(tx, now)
	})
}

// CreateSandboxProvider stores p. It fails with ErrAlreadyExists when any provider exists,
// since a control plane has one.
func (s *Store) CreateSandboxProvider(ctx context.Context, p SandboxProvider) error {
	return s.inTx(ctx, func(tx *txn) error {
		var existing string
		err := tx.QueryRowContext(ctx, `SELECT name FROM sandbox_providers LIMIT 1`).Scan(&existing)
		if err == nil {
			return fmt.Errorf("sandbox provider %q: %w (a control plane has one sandbox provider)", existing, ErrAlreadyExists)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		now := s.stamp()
		if err := ensureOwner(ctx, tx, p.Owner, now); err != nil {
			return err
		}
		scopes, _ := json.Marshal(nonNil(p.Scopes))
		_, err = tx.ExecContext(ctx, `INSERT INTO sandbox_providers(name, type, api_url, target, api_key_enc, scopes, release_snapshot, status, owner, require_limits, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.Name, p.Type, p.APIURL, p.Target, p.APIKeyEnc, string(scopes), p.ReleaseSnapshot, p.Status, p.Owner, nullBool(p.RequireLimits), now, now)
		return err
	})
}

// UpdateSandboxProvider replaces the mutable fields of provider p.Name.
func (s *Store) UpdateSandboxProvider(ctx context.Context, p SandboxProvider) error {
	scopes, _ := json.Marshal(nonNil(p.Scopes))
	res, err := s.db.ExecContext(ctx, `UPDATE sandbox_providers SET api_url = ?, target = ?, api_key_enc = ?, scopes = ?, release_snapshot = ?, status = ?, require_limits = ?, updated_at = ? WHERE name = ?`,
		p.APIURL, p.Target, p.APIKeyEnc, string(scopes), p.ReleaseSnapshot, p.Status, nullBool(p.RequireLimits), s.stamp(), p.Name)
	return changedOne(res, err, "updating", "sandbox provider %q", p.Name)
}

// GetSandboxProvider reads a provider by name.
func (s *Store) GetSandboxProvider(ctx context.Context, name string) (SandboxProvider, error) {
	if c := s.config(ctx); c != nil {
		return c.provider(name)
	}
	return readProvider(s.db.QueryRowContext(ctx, providerSelect+` WHERE name = ?`, name), name)
}

// OnlySandboxProvider returns the control plane's provider, or ErrNotFound.
func (s *Store) OnlySandboxProvider(ctx context.Context) (SandboxProvider, error) {
	if c := s.config(ctx); c != nil {
		return c.provider("")
	}
	return readProvider(s.db.QueryRowContext(ctx, providerSelect+` LIMIT 1`), "")
}

const providerSelect = `SELECT name, type, api_url, target, api_key_enc, scopes, release_snapshot, status, owner, require_limits FROM sandbox_providers`

// readProvider scans the provider the query for name ("" for any) returned.
func readProvider(row *sql.Row, name string) (SandboxProvider, error) {
	p, err := scanProvider(row)
	if errors.Is(err, sql.ErrNoRows) {
		return p, providerNotFound(name)
	}
	if err != nil {
		return p, fmt.Errorf("reading sandbox provider %q: %w", name, err)
	}
	return p, nil
}

func providerNotFound(name string) error {
	if name == "" {
		return fmt.Errorf("no sandbox provider is configured: %w", ErrNotFound)
	}
	return fmt.Errorf("sandbox provider %q: %w", name, ErrNotFound)
}

func scanProvider(sc scanner) (SandboxProvider, error) {
	var p SandboxProvider
	var scopes string
	var require sql.NullInt64
	if err := sc.Scan(&p.Name, &p.Type, &p.APIURL, &p.Target, &p.APIKeyEnc, &scopes, &p.ReleaseSnapshot, &p.Status, &p.Owner, &require); err != nil {
		return p, err
	}
	_ = json.Unmarshal([]byte(scopes), &p.Scopes)
	if require.Valid {
		v := require.Int64 != 0
		p.RequireLimits = &v
	}
	return p, nil
}

// nullBool stores an optional setting: NULL when unset, else 0 or 1 (the column is a
// BIGINT on both databases).
func nullBool(b *bool) sql.NullInt64 {
	if b == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: b2i(*b), Valid: true}
}

// DeleteSandboxProvider removes the provider with its reserved environment and snapshots.
// It fails with ErrInUse, naming them, while anything uses it (providerUsers).
func (s *Store) DeleteSandboxProvider(ctx context.Context, name string) error {
	return s.inTx(ctx, func(tx *txn) error {
		users, err := providerUsers(ctx, tx, name)
		if err != nil {
			return err
		}
		if len(users) > 0 {
			return fmt.Errorf("sandbox provider %q is used by %v: %w", name, users, ErrInUse)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM environments WHERE provider = ?`, name); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM sandbox_providers WHERE name = ?`, name)
		return changedOne(res, err, "deleting", "sandbox provider %q", name)
	})
}

// providerUsers names what keeps sandbox provider from being deleted ("environment x",
// "agent y"): the environments made on it but its reserved one, the agents of those,
// and its volumes and registries, which hold files and credentials in its backend.
func providerUsers(ctx context.Context, q querier, provider string) ([]string, error) {
	var users []string
	for _, u := range []struct{ kind, query string }{
		{"environment", `SELECT name FROM environments WHERE provider = ? AND reserved = 0 ORDER BY name`},
		{"agent", `SELECT a.name FROM agents a JOIN environments e ON a.environment = e.name WHERE e.provider = ? ORDER BY a.name`},
		{"volume", `SELECT name FROM volumes WHERE provider = ? ORDER BY name`},
		{"registry", `SELECT name FROM registries WHERE provider = ? ORDER BY name`},
	} {
		names, err := queryRows(ctx, q, scanString, u.query, provider)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			users = append(users, u.kind+" "+n)
		}
	}
	return users, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
