package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// What the web page's Environments page shows of each environment besides the row
// itself (issue 30): when it was last updated, its secrets' names (never their values,
// which these queries do not even read), and which environments a user's agents use.

// SecretName is a secret as the Environments page lists it: no value.
type SecretName struct {
	EnvName   string
	Hosts     []string
	Version   int64
	UpdatedAt time.Time
}

// SecretNames lists an environment's secrets by variable name, without their values.
func (s *Store) SecretNames(ctx context.Context, environment string) ([]SecretName, error) {
	out, err := queryRows(ctx, s.db, func(sc scanner) (SecretName, error) {
		var n SecretName
		var hosts string
		var updated int64
		err := sc.Scan(&n.EnvName, &hosts, &n.Version, &updated)
		_ = json.Unmarshal([]byte(hosts), &n.Hosts)
		n.UpdatedAt = time.UnixMilli(updated)
		return n, err
	}, `SELECT env_name, hosts, version, updated_at FROM secrets WHERE environment = ? ORDER BY env_name`, environment)
	if err != nil {
		return nil, fmt.Errorf("listing the secrets of environment %q: %w", environment, err)
	}
	return out, nil
}

// EnvironmentsUpdatedAt is when each environment was last changed (its row, by apply),
// by name.
func (s *Store) EnvironmentsUpdatedAt(ctx context.Context) (map[string]time.Time, error) {
	type row struct {
		name string
		at   int64
	}
	rows, err := queryRows(ctx, s.db, func(sc scanner) (row, error) {
		var r row
		err := sc.Scan(&r.name, &r.at)
		return r, err
	}, `SELECT name, updated_at FROM environments`)
	if err != nil {
		return nil, fmt.Errorf("reading when environments were updated: %w", err)
	}
	out := make(map[string]time.Time, len(rows))
	for _, r := range rows {
		out[r.name] = time.UnixMilli(r.at)
	}
	return out, nil
}

// EnvironmentsOfOwner lists the environments that owner's agents reference.
func (s *Store) EnvironmentsOfOwner(ctx context.Context, owner string) ([]string, error) {
	out, err := queryRows(ctx, s.db, scanString, `SELECT DISTINCT environment FROM agents WHERE owner = ? AND environment IS NOT NULL ORDER BY environment`, owner)
	if err != nil {
		return nil, fmt.Errorf("listing the environments of %q's agents: %w", owner, err)
	}
	return out, nil
}
