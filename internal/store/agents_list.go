package store

import (
	"context"
	"fmt"
)

// ListAgentNames lists the published agents' names, sorted.
func (s *Store) ListAgentNames(ctx context.Context) ([]string, error) {
	if c := s.config(ctx); c != nil {
		return c.agentNames(), nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT name FROM agents ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("listing agents: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}
