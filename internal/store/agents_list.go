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
	names, err := queryRows(ctx, s.db, scanString, `SELECT name FROM agents ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("listing agents: %w", err)
	}
	return names, nil
}
