package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Session sandbox states, as the harness records them. The backend's own status is the
// truth about the box; this record is the pointer to reattach and the lifecycle clock.
const (
	SandboxStateRunning  = "running"
	SandboxStateStopped  = "stopped"
	SandboxStateArchived = "archived"
	SandboxStateDeleted  = "deleted"  // removed after delete_after_minutes idle, or with the session
	SandboxStateLost     = "lost"     // died underneath a call; the next call recreates it
	SandboxStateChanging = "changing" // a reaper is stopping/archiving/deleting it right now
)

// SessionSandbox is the sandbox record of a session (at most one).
type SessionSandbox struct {
	SessionID    string
	Provider     string
	ProviderType string
	SandboxID    string
	Environment  string
	SnapshotID   string // the snapshot the sandbox was created from
	State        string
	Generation   int64 // 1 for the first sandbox, +1 each time it was recreated
	ActiveExecs  int64
	ExecOwner    string
	Uncertain    []string // workspace paths a dead call was writing
	// Volumes are the trueforge_volume names the sandbox mounts (migration 15), so that
	// a volume its environment's owner may no longer use stops its reuse too.
	Volumes    []string
	CreatedAt  time.Time
	LastUsedAt time.Time
	StateAt    time.Time
}

const sandboxSelect = `SELECT session_id, provider, provider_type, sandbox_id, environment, snapshot_id, state, generation,
	active_execs, exec_owner, uncertain, created_at, last_used_at, state_at, volumes FROM session_sandboxes`

func scanSandbox(sc scanner) (SessionSandbox, error) {
	var b SessionSandbox
	var unc, vols string
	var created, used, stateAt int64
	err := sc.Scan(&b.SessionID, &b.Provider, &b.ProviderType, &b.SandboxID, &b.Environment, &b.SnapshotID, &b.State, &b.Generation,
		&b.ActiveExecs, &b.ExecOwner, &unc, &created, &used, &stateAt, &vols)
	_ = json.Unmarshal([]byte(unc), &b.Uncertain)
	_ = json.Unmarshal([]byte(vols), &b.Volumes)
	b.CreatedAt, b.LastUsedAt, b.StateAt = time.UnixMilli(created), time.UnixMilli(used), time.UnixMilli(stateAt)
	return b, err
}

// PutSessionSandbox records (or replaces) a session's sandbox.
func (s *Store) PutSessionSandbox(ctx context.Context, b SessionSandbox) error {
	unc, _ := json.Marshal(nonNil(b.Uncertain))
	vols, _ := json.Marshal(nonNil(b.Volumes))
	_, err := s.db.ExecContext(ctx, `INSERT INTO session_sandboxes(session_id, provider, provider_type, sandbox_id, environment, snapshot_id, state,
		generation, active_execs, exec_owner, uncertain, created_at, last_used_at, state_at, volumes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, '', ?, ?, ?, ?, ?)
		ON CONFLICT(session_id) DO UPDATE SET provider = excluded.provider, provider_type = excluded.provider_type, sandbox_id = excluded.sandbox_id,
		environment = excluded.environment, snapshot_id = excluded.snapshot_id, state = excluded.state, generation = excluded.generation,
		active_execs = 0, exec_owner = '', uncertain = excluded.uncertain, created_at = excluded.created_at,
		last_used_at = excluded.last_used_at, state_at = excluded.state_at, volumes = excluded.volumes`,
		b.SessionID, b.Provider, b.ProviderType, b.SandboxID, b.Environment, b.SnapshotID, b.State, b.Generation, string(unc),
		b.CreatedAt.UnixMilli(), b.LastUsedAt.UnixMilli(), b.StateAt.UnixMilli(), string(vols))
	return wrote(err, notFound("session %q", b.SessionID), "recording the sandbox of session %q", b.SessionID)
}

// GetSessionSandbox reads a session's sandbox record; ErrNotFound when it never had one.
func (s *Store) GetSessionSandbox(ctx context.Context, sessionID string) (SessionSandbox, error) {
	b, err := scanSandbox(s.db.QueryRowContext(ctx, sandboxSelect+` WHERE session_id = ?`, sessionID))
	return found(b, err, "reading the", "sandbox of session %q", sessionID)
}

// ListSessionSandboxes lists every sandbox record.
func (s *Store) ListSessionSandboxes(ctx context.Context) ([]SessionSandbox, error) {
	return s.querySandboxes(ctx, sandboxSelect+` ORDER BY created_at, session_id`)
}

// ListOwnedSessionSandboxes is ListSessionSandboxes for the sessions of owner only: what
// a user may see of the sandboxes (a sandbox id is not authorization).
func (s *Store) ListOwnedSessionSandboxes(ctx context.Context, owner string) ([]SessionSandbox, error) {
	return s.querySandboxes(ctx, sandboxSelect+` WHERE session_id IN (SELECT id FROM sessions WHERE owner = ?) ORDER BY created_at, session_id`, owner)
}

func (s *Store) querySandboxes(ctx context.Context, q string, args ...any) ([]SessionSandbox, error) {
	boxes, err := queryRows(ctx, s.db, scanSandbox, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing session sandboxes: %w", err)
	}
	return boxes, nil
}

// SwapSandboxState moves a session's sandbox from one of the states in from to to, at
// time at, and reports whether it did. With idleBefore non-zero it only moves a sandbox
// that has no command running and was last used before idleBefore: the reaper's
// compare-and-swap, so a call that just started is never stopped underneath.
func (s *Store) SwapSandboxState(ctx context.Context, sessionID string, from []string, to string, at, idleBefore time.Time) (bool, error) {
	q := `UPDATE session_sandboxes SET state = ?, state_at = ? WHERE session_id = ? AND state IN (` + placeholders(len(from)) + `)`
	args := []any{to, at.UnixMilli(), sessionID}
	for _, f := range from {
		args = append(args, f)
	}
	if !idleBefore.IsZero() {
		q += ` AND active_execs = 0 AND last_used_at < ?`
		args = append(args, idleBefore.UnixMilli())
	}
	res, err := s.db.ExecContext(ctx, q, args...)
	return changed(res, err, "changing the sandbox state of session %q", sessionID)
}

// BeginSandboxUse marks a call in progress on a running sandbox (active_execs + 1, owner
// recorded, last used now). It reports false when the sandbox is not running.
func (s *Store) BeginSandboxUse(ctx context.Context, sessionID, owner string, at time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE session_sandboxes SET active_execs = active_execs + 1, exec_owner = ?, last_used_at = ?
		WHERE session_id = ? AND state = ?`, owner, at.UnixMilli(), sessionID, SandboxStateRunning)
	return changed(res, err, "marking the sandbox of session %q busy", sessionID)
}

// EndSandboxUse ends a call begun with BeginSandboxUse; the end of a call is activity too.
func (s *Store) EndSandboxUse(ctx context.Context, sessionID string, at time.Time) error {
	ms := at.UnixMilli()
	_, err := s.db.ExecContext(ctx, `UPDATE session_sandboxes SET active_execs = CASE WHEN active_execs > 0 THEN active_execs - 1 ELSE 0 END,
		last_used_at = CASE WHEN last_used_at > ? THEN last_used_at ELSE ? END
		WHERE session_id = ?`, ms, ms, sessionID)
	if err != nil {
		return fmt.Errorf("marking the sandbox of session %q idle: %w", sessionID, err)
	}
	return nil
}

// ClearStaleSandboxUse resets the busy count of a sandbox whose exec owner is dead.
func (s *Store) ClearStaleSandboxUse(ctx context.Context, sessionID, owner string) error {
	_, err := s.ClaimStaleSandboxUse(ctx, sessionID, owner)
	return err
}

// ClaimStaleSandboxUse is ClearStaleSandboxUse that reports whether this call cleared
// the dead owner's use: of two processes that reclaim the same sandbox at once (two
// harness replicas), exactly one gets true, and only it records the reclaim.
func (s *Store) ClaimStaleSandboxUse(ctx context.Context, sessionID, owner string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE session_sandboxes SET active_execs = 0, exec_owner = '' WHERE session_id = ? AND exec_owner = ? AND (active_execs <> 0 OR exec_owner <> '')`, sessionID, owner)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// SetSandboxUncertain records the workspace paths a dead call was writing.
func (s *Store) SetSandboxUncertain(ctx context.Context, sessionID string, paths []string) error {
	unc, _ := json.Marshal(nonNil(paths))
	_, err := s.db.ExecContext(ctx, `UPDATE session_sandboxes SET uncertain = ? WHERE session_id = ?`, string(unc), sessionID)
	return err
}

func placeholders(n int) string {
	if n == 0 {
		return "NULL"
	}
	b := make([]byte, 0, 2*n)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '?')
	}
	return string(b)
}
