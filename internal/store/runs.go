package store

import (
	"context"
	"database/sql"
	"errors"
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

// HeartbeatRun shows that a run's harness is alive, and reports whether someone asked
// for the run to be cancelled (RequestCancel): a run is cancelled by the process running
// it, and another replica asks through the row.
func (s *Store) HeartbeatRun(ctx context.Context, id string) (cancelRequested bool, err error) {
	var flag int64
	err = s.db.QueryRowContext(ctx, `UPDATE session_runs SET heartbeat_at = ? WHERE id = ? AND status = ? RETURNING cancel_requested`,
		s.stamp(), id, RunRunning).Scan(&flag)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("heartbeat of run %s: %w", id, err)
	}
	return flag != 0, nil
}

// RequestCancel asks the process running a run to cancel it (its heartbeat sees the
// request). False when the run is not running.
func (s *Store) RequestCancel(ctx context.Context, id string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE session_runs SET cancel_requested = 1 WHERE id = ? AND status = ?`, id, RunRunning)
	return changed(res, err, "asking run %s to cancel", id)
}

// RunningRun is the session's running run, if any (ErrNotFound when none).
func (s *Store) RunningRun(ctx context.Context, sessionID string) (Run, error) {
	r := Run{SessionID: sessionID, Status: RunRunning}
	var hb, st int64
	err := s.db.QueryRowContext(ctx, `SELECT id, owner, heartbeat_at, started_at FROM session_runs WHERE session_id = ? AND status = 'running'`, sessionID).
		Scan(&r.ID, &r.Owner, &hb, &st)
	if err != nil {
		return found(Run{}, err, "reading the", "running run of session %q", sessionID)
	}
	r.HeartbeatAt, r.StartedAt = time.UnixMilli(hb), time.UnixMilli(st)
	return r, nil
}

// EndRun moves a running run to a final status; a run already ended keeps its status.
func (s *Store) EndRun(ctx context.Context, id, status, detail string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE session_runs SET status = ?, detail = ?, ended_at = ? WHERE id = ? AND status = ?`,
		status, detail, s.stamp(), id, RunRunning)
	return changed(res, err, "ending run %s", id)
}

// Runs lists a session's runs, oldest first.
func (s *Store) Runs(ctx context.Context, sessionID string) ([]Run, error) {
	runs, err := queryRows(ctx, s.db, func(sc scanner) (Run, error) {
		r := Run{SessionID: sessionID}
		var hb, st, en int64
		if err := sc.Scan(&r.ID, &r.Status, &r.Owner, &hb, &st, &en, &r.Detail); err != nil {
			return r, err
		}
		r.HeartbeatAt, r.StartedAt = time.UnixMilli(hb), time.UnixMilli(st)
		if en != 0 {
			r.EndedAt = time.UnixMilli(en)
		}
		return r, nil
	}, `SELECT id, status, owner, heartbeat_at, started_at, ended_at, detail FROM session_runs WHERE session_id = ? ORDER BY started_at, id`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("listing runs of session %q: %w", sessionID, err)
	}
	return runs, nil
}

// RunningRuns lists every run still marked running, in every session, oldest heartbeat
// first: what a harness replica looks through for runs whose harness died (the partial
// index session_runs_one_running serves it).
func (s *Store) RunningRuns(ctx context.Context) ([]Run, error) {
	runs, err := queryRows(ctx, s.db, func(sc scanner) (Run, error) {
		r := Run{Status: RunRunning}
		var hb, st int64
		err := sc.Scan(&r.ID, &r.SessionID, &r.Owner, &hb, &st)
		r.HeartbeatAt, r.StartedAt = time.UnixMilli(hb), time.UnixMilli(st)
		return r, err
	}, `SELECT id, session_id, owner, heartbeat_at, started_at FROM session_runs WHERE status = 'running' ORDER BY heartbeat_at, id`)
	if err != nil {
		return nil, fmt.Errorf("listing running runs: %w", err)
	}
	return runs, nil
}
