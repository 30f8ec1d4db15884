package store

import (
	"context"
	"fmt"
	"time"
)

// Run statuses. A run is one user message and every model step and tool call it led to.
const (
	RunRunning     = "running"
	RunCompleted   = "completed"
	RunCancelled   = "cancelled"
	RunFailed      = "failed"
	RunInterrupted = "interrupted" // its harness died or stopped heartbeating
)

// Run is a row of session_runs. Owner names the harness process running it
// ("host:pid:start"), so another process can tell a dead owner from a slow one.
type Run struct {
	ID          string
	SessionID   string
	Status      string
	Owner       string
	HeartbeatAt time.Time
	StartedAt   time.Time
	EndedAt     time.Time
	Detail      string
}

// StartRun records a run as running.
func (s *Store) StartRun(ctx context.Context, r Run) error {
	now := s.stamp()
	_, err := s.db.ExecContext(ctx, `INSERT INTO session_runs(id, session_id, status, owner, heartbeat_at, started_at) VALUES (?, ?, ?, ?, ?, ?)`,
		r.ID, r.SessionID, RunRunning, r.Owner, now, now)
	if isUnique(err) {
		return fmt.Errorf("starting run %s of session %s: %w", r.ID, r.SessionID, ErrRunning)
	}
	if err != nil {
		return fmt.Errorf("starting run %s: %w", r.ID, err)
	}
	return nil
}

// HeartbeatRun shows that a run's harness is alive.
func (s *Store) HeartbeatRun(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE session_runs SET heartbeat_at = ? WHERE id = ? AND status = ?`, s.stamp(), id, RunRunning)
	return err
}

// EndRun moves a running run to a final status; a run already ended keeps its status.
func (s *Store) EndRun(ctx context.Context, id, status, detail string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE session_runs SET status = ?, detail = ?, ended_at = ? WHERE id = ? AND status = ?`,
		status, detail, s.stamp(), id, RunRunning)
	if err != nil {
		return false, fmt.Errorf("ending run %s: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// Runs lists a session's runs, oldest first.
func (s *Store) Runs(ctx context.Context, sessionID string) ([]Run, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, status, owner, heartbeat_at, started_at, ended_at, detail FROM session_runs WHERE session_id = ? ORDER BY started_at, id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("listing runs of session %q: %w", sessionID, err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r := Run{SessionID: sessionID}
		var hb, st, en int64
		if err := rows.Scan(&r.ID, &r.Status, &r.Owner, &hb, &st, &en, &r.Detail); err != nil {
			return nil, err
		}
		r.HeartbeatAt, r.StartedAt = time.UnixMilli(hb), time.UnixMilli(st)
		if en != 0 {
			r.EndedAt = time.UnixMilli(en)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// RunningRuns lists every run still marked running, in every session, oldest heartbeat
// first: what a harness replica looks through for runs whose harness died (the partial
// index session_runs_one_running serves it).
func (s *Store) RunningRuns(ctx context.Context) ([]Run, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, session_id, owner, heartbeat_at, started_at FROM session_runs WHERE status = 'running' ORDER BY heartbeat_at, id`)
	if err != nil {
		return nil, fmt.Errorf("listing running runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r := Run{Status: RunRunning}
		var hb, st int64
		if err := rows.Scan(&r.ID, &r.SessionID, &r.Owner, &hb, &st); err != nil {
			return nil, err
		}
		r.HeartbeatAt, r.StartedAt = time.UnixMilli(hb), time.UnixMilli(st)
		out = append(out, r)
	}
	return out, rows.Err()
}
