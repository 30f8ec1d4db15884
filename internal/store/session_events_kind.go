package store

import (
	"context"
	"fmt"
	"time"
)

// EventsOfKind returns a session's events of one kind, in order: for what the harness
// looks up in a long log (the skills loaded into a sandbox) without reading all of it.
func (s *Store) EventsOfKind(ctx context.Context, sessionID, kind string) ([]Event, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq, run_id, kind, payload, created_at FROM session_events WHERE session_id = ? AND kind = ? ORDER BY seq`, sessionID, kind)
	if err != nil {
		return nil, fmt.Errorf("reading %s events of session %q: %w", kind, sessionID, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		e := Event{SessionID: sessionID}
		var payload string
		var created int64
		if err := rows.Scan(&e.Seq, &e.RunID, &e.Kind, &payload, &created); err != nil {
			return nil, err
		}
		e.Payload, e.CreatedAt = []byte(payload), time.UnixMilli(created)
		out = append(out, e)
	}
	return out, rows.Err()
}
