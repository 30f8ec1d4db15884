package store

import (
	"context"
	"fmt"
	"time"
)

// Leases let one of several harness processes (replicas on one database) act on
// something at a time: the reaper on a sandbox, a repair on a session. A lease is a row
// of table leases naming its holder (a process: lifecycle.ProcessOwner) and when it
// lapses. The holder renews it while it works and releases it when done; a holder that
// dies simply stops renewing, and the lease lapses for the next taker. Nothing waits
// on a lease: a process that finds one held by another skips the work, which the
// holder is doing.
//
// Rows rather than PostgreSQL advisory locks: an advisory lock belongs to a database
// session, so it would pin one pooled connection per lock held and vanish with a
// dropped connection while its holder still works; a row carries its holder's name
// (shown to whoever is kept out), works on SQLite too, and its expiry is explicit.
//
// Expiry is judged by the database's clock (dbNowMillis), never a replica's, so
// replicas whose clocks differ still agree on when a lease lapsed.

// Lease is a row of the leases table.
type Lease struct {
	Name      string
	Holder    string
	ExpiresAt time.Time
}

// dbNowMillis is the database's current time in Unix milliseconds, as SQL.
func (d dialect) dbNowMillis() string {
	if d == postgres {
		return `CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)`
	}
	return `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`
}

// AcquireLease takes lease name for holder for ttl and reports whether holder has it:
// true when the lease was free, had lapsed, or was holder's already (then it is renewed);
// false when another holder's lease is still running. One statement, so of two
// processes taking a free lease at the same moment exactly one gets it.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if name == "" || holder == "" || ttl <= 0 {
		return false, fmt.Errorf("acquiring lease %q for %q: a lease needs a name, a holder and a positive duration (got %s)", name, holder, ttl)
	}
	now := s.db.dialect.dbNowMillis()
	res, err := s.db.ExecContext(ctx, `INSERT INTO leases(name, holder, expires_at) VALUES (?, ?, `+now+` + ?)
		ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE leases.holder = excluded.holder OR leases.expires_at <= `+now,
		name, holder, ttl.Milliseconds())
	return changed(res, err, "acquiring lease %q", name)
}

// RenewLease extends holder's lease name to ttl from now. It reports false when holder
// no longer has it (released, or lapsed and taken by another): the work it guarded may
// now be someone else's.
func (s *Store) RenewLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE leases SET expires_at = `+s.db.dialect.dbNowMillis()+` + ? WHERE name = ? AND holder = ?`,
		ttl.Milliseconds(), name, holder)
	return changed(res, err, "renewing lease %q", name)
}

// ReleaseLease gives up holder's lease name; a lease holder does not have is left alone.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM leases WHERE name = ? AND holder = ?`, name, holder); err != nil {
		return fmt.Errorf("releasing lease %q: %w", name, err)
	}
	return nil
}

// GetLease reads lease name, lapsed or not; ErrNotFound when nobody took it or it was
// released.
func (s *Store) GetLease(ctx context.Context, name string) (Lease, error) {
	l := Lease{Name: name}
	var exp int64
	err := s.db.QueryRowContext(ctx, `SELECT holder, expires_at FROM leases WHERE name = ?`, name).Scan(&l.Holder, &exp)
	if err != nil {
		return found(l, err, "reading", "lease %q", name)
	}
	l.ExpiresAt = time.UnixMilli(exp)
	return l, nil
}

// PruneLeases deletes leases that lapsed more than olderThan ago: the rows of holders
// that died holding them, for things that are gone (a deleted session's sandbox). It
// returns how many it deleted.
func (s *Store) PruneLeases(ctx context.Context, olderThan time.Duration) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM leases WHERE expires_at < `+s.db.dialect.dbNowMillis()+` - ?`, olderThan.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("pruning lapsed leases: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
