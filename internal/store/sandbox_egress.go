package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// SandboxEgress is what the harness keeps to recreate a local sandbox's egress proxy:
// the network policy read when the sandbox was created (a running session keeps it until
// its sandbox is replaced) and the proxy's state, sealed by the caller (it holds the
// sandbox CA's private key and the placeholders in the sandbox's environment).
type SandboxEgress struct {
	SandboxID    string
	SessionID    string
	Environment  string
	BlockAll     bool
	AllowDomains []string
	StateEnc     []byte
	CreatedAt    time.Time
}

// PutSandboxEgress records (or replaces) a sandbox's egress state.
func (s *Store) PutSandboxEgress(ctx context.Context, e SandboxEgress) error {
	allow, _ := json.Marshal(nonNil(e.AllowDomains))
	_, err := s.db.ExecContext(ctx, `INSERT INTO sandbox_egress(sandbox_id, session_id, environment, block_all, allow_domains, state_enc, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(sandbox_id) DO UPDATE SET session_id = excluded.session_id, environment = excluded.environment,
		block_all = excluded.block_all, allow_domains = excluded.allow_domains, state_enc = excluded.state_enc, created_at = excluded.created_at`,
		e.SandboxID, e.SessionID, e.Environment, b2i(e.BlockAll), string(allow), e.StateEnc, e.CreatedAt.UnixMilli())
	return wrote(err, notFound("session %q", e.SessionID), "recording the egress state of sandbox %s", e.SandboxID)
}

// GetSandboxEgress reads a sandbox's egress state; ErrNotFound when it has none.
func (s *Store) GetSandboxEgress(ctx context.Context, sandboxID string) (SandboxEgress, error) {
	var e SandboxEgress
	var blockAll, created int64
	var allow string
	err := s.db.QueryRowContext(ctx, `SELECT sandbox_id, session_id, environment, block_all, allow_domains, state_enc, created_at
		FROM sandbox_egress WHERE sandbox_id = ?`, sandboxID).Scan(&e.SandboxID, &e.SessionID, &e.Environment, &blockAll, &allow, &e.StateEnc, &created)
	if err != nil {
		return found(e, err, "reading the", "egress state of sandbox %s", sandboxID)
	}
	e.BlockAll = blockAll != 0
	_ = json.Unmarshal([]byte(allow), &e.AllowDomains)
	e.CreatedAt = time.UnixMilli(created)
	return e, nil
}

// DeleteSandboxEgress forgets a sandbox's egress state; a missing one is fine.
func (s *Store) DeleteSandboxEgress(ctx context.Context, sandboxID string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM sandbox_egress WHERE sandbox_id = ?`, sandboxID); err != nil {
		return fmt.Errorf("deleting the egress state of sandbox %s: %w", sandboxID, err)
	}
	return nil
}
