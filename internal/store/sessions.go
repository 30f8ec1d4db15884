package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Session is one conversation with an agent. Its history is the event log
// (AppendEvent/Events); the row keeps only what lists need.
type Session struct {
	ID     string
	Agent  string
	Owner  string
	Replay bool // the agent's model is a scripted replay, not a live model
	// Environment is the session's one-off environment, chosen when it was created
	// (the API's POST /sessions), which its sandboxes are made from instead of the
	// agent's; "" means the agent's.
	Environment  string
	InputTokens  int64
	OutputTokens int64
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Event is one entry of a session's append-only log. Seq starts at 1 and has no gaps.
type Event struct {
	SessionID string
	Seq       int64
	RunID     string
	Kind      string
	Payload   []byte // JSON
	CreatedAt time.Time
}

// CreateSession stores a new session.
func (s *Store) CreateSession(ctx context.Context, ss Session) error {
	now := s.stamp()
	var env any // NULL for the agent's own
	if ss.Environment != "" {
		env = ss.Environment
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO sessions(id, agent, owner, replay, environment, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		ss.ID, ss.Agent, ss.Owner, b2i(ss.Replay), env, now, now)
	return inserted(err, nil, "session %q", ss.ID)
}

const sessionSelect = `SELECT id, agent, owner, replay, environment, input_tokens, output_tokens, created_at, updated_at FROM sessions`

func scanSession(sc scanner) (Session, error) {
	var ss Session
	var replay, created, updated int64
	var env sql.NullString
	err := sc.Scan(&ss.ID, &ss.Agent, &ss.Owner, &replay, &env, &ss.InputTokens, &ss.OutputTokens, &created, &updated)
	ss.Replay, ss.Environment = replay != 0, env.String
	ss.CreatedAt, ss.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
	return ss, err
}

// GetSession reads one session.
func (s *Store) GetSession(ctx context.Context, id string) (Session, error) {
	ss, err := scanSession(s.db.QueryRowContext(ctx, sessionSelect+` WHERE id = ?`, id))
	return found(ss, err, "reading", "session %q", id)
}

// ListSessions lists the sessions of owner ("" means every owner's: operators and tests)
// and of agent ("" means every agent), newest first.
func (s *Store) ListSessions(ctx context.Context, owner, agent string) ([]Session, error) {
	q, args := sessionSelect+` WHERE 1 = 1`, []any{}
	if owner != "" {
		q, args = q+` AND owner = ?`, append(args, owner)
	}
	if agent != "" {
		q, args = q+` AND agent = ?`, append(args, agent)
	}
	sessions, err := queryRows(ctx, s.db, scanSession, q+` ORDER BY created_at DESC, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	return sessions, nil
}

// DeleteSession removes a session and everything it owns in the store (events, runs,
// sandbox record, artifacts, outputs). The caller deletes the sandbox itself first.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
	return changedOne(res, err, "deleting", "session %q", id)
}

// AppendEvent adds an event at the end of a session's log and returns its sequence
// number. Events are never changed or removed, except with their session.
func (s *Store) AppendEvent(ctx context.Context, sessionID, runID, kind string, payload []byte) (int64, error) {
	var seq int64
	err := s.inTx(ctx, func(tx *txn) error {
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) + 1 FROM session_events WHERE session_id = ?`, sessionID).Scan(&seq); err != nil {
			return err
		}
		now := s.stamp()
		q, args := s.announced(`INSERT INTO session_events(session_id, seq, run_id, kind, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			[]any{sessionID, seq, runID, kind, string(payload), now}, sessionID, seq)
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			if isForeignKey(err) {
				return fmt.Errorf("session %q: %w", sessionID, ErrNotFound)
			}
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE sessions SET updated_at = ? WHERE id = ?`, now, sessionID)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("appending %s event to session %q: %w", kind, sessionID, err)
	}
	s.feed.appended(sessionID, seq)
	return seq, nil
}

// announced is insert, a statement that appends events to session sessionID up to seq,
// made to announce them on PostgreSQL's event channel (event_feed.go) in the same
// round trip: NOTIFY is sent when the transaction commits, and never if it does not.
func (s *Store) announced(insert string, args []any, sessionID string, seq int64) (string, []any) {
	if s.db.dialect != postgres {
		return insert, args
	}
	return `WITH appended AS (` + insert + `) SELECT pg_notify('` + eventChannel + `', ?)`, append(args, notifyPayload(sessionID, seq))
}

// Events returns a session's events with seq > after, in order.
func (s *Store) Events(ctx context.Context, sessionID string, after int64) ([]Event, error) {
	events, err := queryEvents(ctx, s.db, sessionID, eventSelect+` AND seq > ? ORDER BY seq`, after)
	if err != nil {
		return nil, fmt.Errorf("reading events of session %q: %w", sessionID, err)
	}
	return events, nil
}

// eventSelect reads the events of one session, its first argument; queryEvents scans
// what it returns.
const eventSelect = `SELECT seq, run_id, kind, payload, created_at FROM session_events WHERE session_id = ?`

// queryEvents runs query, eventSelect with its own conditions, for the events of session
// sessionID (args follow the session's).
func queryEvents(ctx context.Context, q querier, sessionID, query string, args ...any) ([]Event, error) {
	return queryRows(ctx, q, func(sc scanner) (Event, error) {
		e := Event{SessionID: sessionID}
		var payload string
		var created int64
		if err := sc.Scan(&e.Seq, &e.RunID, &e.Kind, &payload, &created); err != nil {
			return e, err
		}
		e.Payload, e.CreatedAt = []byte(payload), time.UnixMilli(created)
		return e, nil
	}, query, append([]any{sessionID}, args...)...)
}

// PutToolOutput keeps the full output of a tool call whose result was cut for the model.
func (s *Store) PutToolOutput(ctx context.Context, sessionID, callID string, content []byte) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO tool_outputs(session_id, call_id, content, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT(session_id, call_id) DO UPDATE SET content = excluded.content`, sessionID, callID, content, s.stamp())
	if err != nil {
		return fmt.Errorf("keeping the output of call %s: %w", callID, err)
	}
	return nil
}

// GetToolOutput returns the full output kept for a tool call.
func (s *Store) GetToolOutput(ctx context.Context, sessionID, callID string) ([]byte, error) {
	var b []byte
	err := s.db.QueryRowContext(ctx, `SELECT content FROM tool_outputs WHERE session_id = ? AND call_id = ?`, sessionID, callID).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("output of call %q in session %q: %w", callID, sessionID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the output of call %s: %w", callID, err)
	}
	return b, nil
}

// EventInput is one event of a Batch.
type EventInput struct {
	Kind    string
	Payload []byte
}

// RunEnd moves a running run to a final status (see EndRun).
type RunEnd struct {
	ID, Status, Detail string
}

// Batch is what one step of the agent loop commits at once: events appended in order,
// and optionally a run started or ended and tokens added to the session, all in one
// transaction, so a turn costs a few commits instead of one per row.
type Batch struct {
	SessionID                 string
	RunID                     string
	StartRun                  *Run
	Events                    []EventInput
	InputTokens, OutputTokens int64
	EndRun                    *RunEnd
}

// Commit applies a Batch and returns the sequence numbers of its events.
func (s *Store) Commit(ctx context.Context, b Batch) ([]int64, error) {
	var seqs []int64
	err := s.inTx(ctx, func(tx *txn) error {
		seqs = seqs[:0]
		now := s.stamp()
		if r := b.StartRun; r != nil {
			if _, err := tx.ExecContext(ctx, `INSERT INTO session_runs(id, session_id, status, owner, heartbeat_at, started_at) VALUES (?, ?, ?, ?, ?, ?)`,
				r.ID, b.SessionID, RunRunning, r.Owner, now, now); err != nil {
				if isUnique(err) {
					return fmt.Errorf("starting run %s of session %s: %w", r.ID, b.SessionID, ErrRunning)
				}
				if isForeignKey(err) {
					return fmt.Errorf("starting run %s: session %q: %w", r.ID, b.SessionID, ErrNotFound)
				}
				return fmt.Errorf("starting run %s: %w", r.ID, err)
			}
		}
		if len(b.Events) > 0 {
			var seq int64
			if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM session_events WHERE session_id = ?`, b.SessionID).Scan(&seq); err != nil {
				return err
			}
			// One multi-row INSERT: statements, not rows, are what a commit pays for.
			q := `INSERT INTO session_events(session_id, seq, run_id, kind, payload, created_at) VALUES `
			args := make([]any, 0, 6*len(b.Events))
			for i, e := range b.Events {
				seq++
				if i > 0 {
					q += ", "
				}
				q += "(?, ?, ?, ?, ?, ?)"
				args = append(args, b.SessionID, seq, b.RunID, e.Kind, string(e.Payload), now)
				seqs = append(seqs, seq)
			}
			q, args = s.announced(q, args, b.SessionID, seq)
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				if isForeignKey(err) {
					return fmt.Errorf("session %q: %w", b.SessionID, ErrNotFound)
				}
				return err
			}
		}
		// The session row changes with tokens, or with plain events (updated_at); a
		// run's start and end are dated on the run row instead, saving a statement.
		if b.InputTokens != 0 || b.OutputTokens != 0 || (b.StartRun == nil && b.EndRun == nil) {
			if _, err := tx.ExecContext(ctx, `UPDATE sessions SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, updated_at = ? WHERE id = ?`,
				b.InputTokens, b.OutputTokens, now, b.SessionID); err != nil {
				return err
			}
		}
		if r := b.EndRun; r != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE session_runs SET status = ?, detail = ?, ended_at = ? WHERE id = ? AND status = ?`,
				r.Status, r.Detail, now, r.ID, RunRunning); err != nil {
				return fmt.Errorf("ending run %s: %w", r.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("committing to session %q: %w", b.SessionID, err)
	}
	if len(seqs) > 0 {
		s.feed.appended(b.SessionID, seqs[len(seqs)-1])
	}
	return seqs, nil
}
