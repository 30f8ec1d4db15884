package store

import (
	"context"
	"fmt"
)

// EventsOfKind returns a session's events of one kind, in order: for what the harness
// looks up in a long log (the skills loaded into a sandbox) without reading all of it.
func (s *Store) EventsOfKind(ctx context.Context, sessionID, kind string) ([]Event, error) {
	events, err := queryEvents(ctx, s.db, sessionID, eventSelect+` AND kind = ? ORDER BY seq`, kind)
	if err != nil {
		return nil, fmt.Errorf("reading %s events of session %q: %w", kind, sessionID, err)
	}
	return events, nil
}
