package store

import (
	"context"
	"fmt"
	"time"
)

// migrationWarmPools (23): the members of environments' warm pools (issue 28). A member is a
// sandbox made ahead of any session from its environment's current snapshot and
// settings; the first sandbox call of a session takes one (ClaimPoolSandbox) instead of
// waiting for a create. The row is the member's claim token: a claim deletes it, so a
// sandbox is claimed at most once whatever the number of harness replicas, and a claimed
// sandbox never comes back (a pooled sandbox never ran anyone's code).
//
// config is the digest of what the member was created with (snapshot, env, network,
// secrets' names, volumes, limits): a session claims only a member whose digest is the
// one its own create would have had, and the pool keeper replaces the others. A member
// is "creating" from before its create until it is Ready to hand out, so that replicas
// count it and do not overfill the pool.
//
// Who writes: the harness (a runtime table; teams have no access on PostgreSQL).
var migrationWarmPools = migration{sql: `
CREATE TABLE pool_sandboxes (
	sandbox_id  TEXT PRIMARY KEY,
	environment TEXT NOT NULL,
	provider    TEXT NOT NULL,
	snapshot_id TEXT NOT NULL,
	config      TEXT NOT NULL,
	state       TEXT NOT NULL,
	created_at  BIGINT NOT NULL
);
CREATE INDEX pool_sandboxes_environment ON pool_sandboxes(environment, state);
`}

// migrationPoolEgress (25): the egress a member of a proxied environment's pool was
// prepared with (the local backend without block_all). Its proxy's state (CA, the
// placeholders in its environment), sealed by the harness, waits here until a session
// claims the member and serves its proxy; it is not in sandbox_egress, whose rows are
// a session's. Empty for a member without a proxy.
var migrationPoolEgress = migration{sql: `ALTER TABLE pool_sandboxes ADD COLUMN egress TEXT NOT NULL DEFAULT '';`}

// Pool member states.
const (
	PoolCreating = "creating" // recorded before its create, so that replicas count it
	PoolReady    = "ready"    // created: a session may claim it
)

// PoolSandbox is one member of an environment's warm pool.
type PoolSandbox struct {
	SandboxID   string
	Environment string
	Provider    string
	SnapshotID  string
	// Config is the digest of the create request the member was made with.
	Config    string
	State     string
	CreatedAt time.Time
	// Egress is the member's prepared egress, opaque to the store (sealed by the
	// harness); empty when it has no proxy.
	Egress string
}

const poolSelect = `SELECT sandbox_id, environment, provider, snapshot_id, config, state, created_at, egress FROM pool_sandboxes`

func scanPoolSandbox(sc scanner) (PoolSandbox, error) {
	var p PoolSandbox
	var created int64
	err := sc.Scan(&p.SandboxID, &p.Environment, &p.Provider, &p.SnapshotID, &p.Config, &p.State, &created, &p.Egress)
	p.CreatedAt = time.UnixMilli(created)
	return p, err
}

// PutPoolSandbox records a new pool member (in PoolCreating, before its create).
func (s *Store) PutPoolSandbox(ctx context.Context, p PoolSandbox) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO pool_sandboxes(sandbox_id, environment, provider, snapshot_id, config, state, created_at, egress) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		p.SandboxID, p.Environment, p.Provider, p.SnapshotID, p.Config, p.State, p.CreatedAt.UnixMilli(), p.Egress)
	if err != nil {
		return fmt.Errorf("recording pool sandbox %s of environment %q: %w", p.SandboxID, p.Environment, err)
	}
	return nil
}

// MarkPoolSandboxReady moves a member from creating to ready; false means its row is gone
// (another replica's keeper removed it as stale), and the caller must delete the box.
func (s *Store) MarkPoolSandboxReady(ctx context.Context, sandboxID string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE pool_sandboxes SET state = ? WHERE sandbox_id = ? AND state = ?`, PoolReady, sandboxID, PoolCreating)
	if err != nil {
		return false, fmt.Errorf("marking pool sandbox %s ready: %w", sandboxID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ListPoolSandboxes returns every pool member, oldest first.
func (s *Store) ListPoolSandboxes(ctx context.Context) ([]PoolSandbox, error) {
	rows, err := s.db.QueryContext(ctx, poolSelect+` ORDER BY created_at, sandbox_id`)
	if err != nil {
		return nil, fmt.Errorf("listing pool sandboxes: %w", err)
	}
	defer rows.Close()
	var out []PoolSandbox
	for rows.Next() {
		p, err := scanPoolSandbox(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// TakePoolSandbox removes a member's row if it is still in state: true means the caller
// now owns the box (to hand out or to delete), false that another caller took it first.
// The conditional DELETE is the whole claim: on SQLite writes are serialized, and on
// PostgreSQL a second DELETE of the same row waits for the first and then finds it gone,
// so exactly one caller sees a row deleted.
func (s *Store) TakePoolSandbox(ctx context.Context, sandboxID, state string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM pool_sandboxes WHERE sandbox_id = ? AND state = ?`, sandboxID, state)
	if err != nil {
		return false, fmt.Errorf("taking pool sandbox %s: %w", sandboxID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ClaimPoolSandbox takes the oldest ready member of environment's pool made with config,
// if any: ok is false when the pool has none (the caller creates a sandbox instead).
// Candidates another replica claims between the read and the take are skipped.
func (s *Store) ClaimPoolSandbox(ctx context.Context, environment, config string) (p PoolSandbox, ok bool, err error) {
	rows, err := s.db.QueryContext(ctx, poolSelect+` WHERE environment = ? AND state = ? AND config = ? ORDER BY created_at, sandbox_id LIMIT 8`,
		environment, PoolReady, config)
	if err != nil {
		return p, false, fmt.Errorf("reading the warm pool of environment %q: %w", environment, err)
	}
	var cands []PoolSandbox
	for rows.Next() {
		c, err := scanPoolSandbox(rows)
		if err != nil {
			rows.Close()
			return p, false, err
		}
		cands = append(cands, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return p, false, err
	}
	for _, c := range cands {
		took, err := s.TakePoolSandbox(ctx, c.SandboxID, PoolReady)
		if err != nil {
			return p, false, err
		}
		if took {
			return c, true, nil
		}
	}
	return p, false, nil
}
