package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
)

// db is the store's handle on its database: every query goes through it, so that it is
// written once for both dialects (rebind) and counted (Queries, which the plan-cost
// benchmark and tests read).
type db struct {
	sql     *sql.DB
	dialect dialect
	queries atomic.Int64
	// writes is bumped before and after every statement that may change rows and after
	// every commit: the config cache (config_cache.go) is valid only while it is unchanged.
	writes atomic.Uint64
	// log, when the process asks for it (QueryLogEnv), records the running count.
	log *queryLog
	// stmts keeps the statements prepared (SQLite only; nil: none, see stmtCache).
	stmts *stmtCache
}

// writing brackets a statement that may change rows: call it before, and call the
// function it returns after.
func (d *db) writing() func() {
	d.writes.Add(1)
	return func() { d.writes.Add(1) }
}

// mayWrite reports whether q can change rows. Only a statement that starts with SELECT
// is taken for a read; anything else (INSERT ... RETURNING through QueryRow, a WITH that
// updates) counts as a write.
func mayWrite(q string) bool {
	q = strings.TrimLeft(q, " \t\r\n")
	return len(q) < 6 || !strings.EqualFold(q[:6], "SELECT")
}

// querier is what store code queries through: the database, or one transaction.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (d *db) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	d.count()
	defer d.writing()()
	res, err := d.statement(ctx, q).exec(ctx, args)
	return res, forbidden(err)
}

func (d *db) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	d.count()
	if mayWrite(q) {
		defer d.writing()()
	}
	rows, err := d.statement(ctx, q).query(ctx, args)
	return rows, forbidden(err)
}

func (d *db) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	d.count()
	if mayWrite(q) {
		defer d.writing()()
	}
	return d.statement(ctx, q).queryRow(ctx, args)
}

// statement is one query as it runs: through its prepared statement when the store
// keeps one (stmtCache), else as text on raw, the pool or a transaction.
type statement struct {
	prepared *sql.Stmt
	raw      querier
	q        string // rebound for the dialect
}

// statement is q on the pool, prepared when the cache has or makes it.
func (d *db) statement(ctx context.Context, q string) statement {
	q = d.dialect.rebind(q)
	return statement{prepared: d.stmts.get(ctx, q), raw: d.sql, q: q}
}

func (s statement) exec(ctx context.Context, args []any) (sql.Result, error) {
	if s.prepared != nil {
		return s.prepared.ExecContext(ctx, args...)
	}
	return s.raw.ExecContext(ctx, s.q, args...)
}

func (s statement) query(ctx context.Context, args []any) (*sql.Rows, error) {
	if s.prepared != nil {
		return s.prepared.QueryContext(ctx, args...)
	}
	return s.raw.QueryContext(ctx, s.q, args...)
}

func (s statement) queryRow(ctx context.Context, args []any) *sql.Row {
	if s.prepared != nil {
		return s.prepared.QueryRowContext(ctx, args...)
	}
	return s.raw.QueryRowContext(ctx, s.q, args...)
}

// txn is one transaction, queried like the database.
type txn struct {
	tx *sql.Tx
	d  *db
	// missed are the cacheable queries it ran unprepared, to prepare once it is over
	// (see stmtCache).
	missed []string
}

// statement is q in the transaction: its cached statement bound to the transaction, or
// q unprepared. It never prepares on the pool: the transaction holds a connection.
func (t *txn) statement(ctx context.Context, q string) statement {
	q = t.d.dialect.rebind(q)
	s := statement{raw: t.tx, q: q}
	if t.d.stmts == nil {
		return s
	}
	if st := t.d.stmts.lookup(q); st != nil {
		s.prepared = t.tx.StmtContext(ctx, st)
	} else if cacheable(q) {
		t.missed = append(t.missed, q)
	}
	return s
}

// prepareMissed prepares what the transaction ran unprepared: call it once the
// transaction has ended, so that its connection is back in the pool.
func (t *txn) prepareMissed(ctx context.Context) {
	if len(t.missed) > 0 {
		t.d.stmts.prepareMissed(ctx, t.missed)
		t.missed = nil
	}
}

func (t *txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	t.d.count()
	defer t.d.writing()()
	res, err := t.statement(ctx, q).exec(ctx, args)
	return res, forbidden(err)
}

func (t *txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	t.d.count()
	if mayWrite(q) {
		defer t.d.writing()()
	}
	rows, err := t.statement(ctx, q).query(ctx, args)
	return rows, forbidden(err)
}

// forbidden marks a refusal of the role (see ErrForbidden) so callers can tell it apart;
// the database's own message stays in the chain.
func forbidden(err error) error {
	if isPermission(err) {
		return fmt.Errorf("%w: %w", ErrForbidden, err)
	}
	return err
}

func (t *txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	t.d.count()
	if mayWrite(q) {
		defer t.d.writing()()
	}
	return t.statement(ctx, q).queryRow(ctx, args)
}

// txAttempts bounds how often inTx runs a transaction that lost a race to another.
const txAttempts = 20

// inTx runs fn in a transaction and commits when it returns nil.
//
// SQLite runs one writer at a time (BEGIN IMMEDIATE), so a transaction never sees another
// half done. PostgreSQL runs them at once: there each transaction is SERIALIZABLE, so
// one that read what another changed meanwhile fails instead of losing that change, and
// is run again here (as is one PostgreSQL broke out of a deadlock), after a short random
// pause, up to txAttempts times. fn may therefore run more than once: it must set its
// results afresh each time, never append to what a previous run left.
func (s *Store) inTx(ctx context.Context, fn func(tx *txn) error) error {
	var opts *sql.TxOptions
	if s.db.dialect == postgres {
		opts = &sql.TxOptions{Isolation: sql.LevelSerializable}
	}
	for attempt := 1; ; attempt++ {
		err := s.tryTx(ctx, opts, fn)
		if err == nil || !isRetryable(err) || attempt == txAttempts {
			return err
		}
		pause := time.Duration(rand.Int64N(int64(attempt) * int64(5*time.Millisecond)))
		// Seen in Terraform's log (TF_LOG_PROVIDER=DEBUG); a no-op elsewhere.
		tflog.Debug(ctx, "store: transaction retried", map[string]any{"attempt": attempt, "pause": pause.String(), "error": err.Error()})
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(pause):
		}
	}
}

func (s *Store) tryTx(ctx context.Context, opts *sql.TxOptions, fn func(tx *txn) error) error {
	s.db.count()
	tx, err := s.db.sql.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	t := &txn{tx: tx, d: s.db}
	if err := fn(t); err != nil {
		_ = tx.Rollback() // fn's error is the one to report
		return err
	}
	s.db.count()
	// What the transaction wrote becomes visible now: a config cache loaded meanwhile
	// may have missed it.
	defer s.db.writing()()
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	t.prepareMissed(ctx)
	return nil
}

// Queries is how many statements (and transaction begins and commits) this store has
// sent to its database: what a plan costs in round trips.
func (s *Store) Queries() int64 { return s.db.queries.Load() }
