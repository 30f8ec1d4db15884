package store

import (
	"context"
	"fmt"
)

// The control plane's settings are name/value rows (table control_plane) that every
// machine sharing the database must agree on: the secret key's check value, the plane's
// id. They are written once, by whoever needs one first, and never changed: team and
// harness roles may insert them but not update or delete them (roles.go), so nobody can
// replace the check value with their own key's.

// Settings reads every setting of the control plane in one query.
func (s *Store) Settings(ctx context.Context) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, value FROM control_plane`)
	if err != nil {
		return nil, fmt.Errorf("reading the control plane's settings: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return nil, err
		}
		out[name] = value
	}
	return out, rows.Err()
}

// InitSetting stores value as setting name unless the setting has a value already, and
// returns the value that is stored: the first writer's, also when two processes race
// (the insert does nothing on a conflict, and the read that follows sees the winner).
func (s *Store) InitSetting(ctx context.Context, name, value string) (string, error) {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO control_plane(name, value) VALUES (?, ?) ON CONFLICT(name) DO NOTHING`, name, value); err != nil {
		return "", fmt.Errorf("storing the control plane's setting %s: %w", name, err)
	}
	var stored string
	if err := s.db.QueryRowContext(ctx, `SELECT value FROM control_plane WHERE name = ?`, name).Scan(&stored); err != nil {
		return "", fmt.Errorf("reading the control plane's setting %s: %w", name, err)
	}
	return stored, nil
}
