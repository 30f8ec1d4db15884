package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
)

// stmtCacheMax bounds the statements a store keeps prepared. The store's queries are a
// fixed set of literals (a few hundred) plus a few built with one placeholder per item
// of a list; past the bound a query simply runs unprepared, as every query did before.
const stmtCacheMax = 512

// stmtCache keeps one prepared statement per query text, for the life of the store.
//
// Why: the SQLite driver parses and plans a statement's SQL every time it is run
// unprepared, which was about a quarter of the CPU of a scripted turn (issue 31). A
// *sql.Stmt prepares once per connection of the pool and then only binds and steps.
// Only SQLite uses it: pgx already keeps the statements it has run prepared on each
// PostgreSQL connection (its default statement cache), and a store there connects as
// one role for its life (no SET ROLE), so row-level security is evaluated as before.
//
// A transaction uses a cached statement through tx.StmtContext, which prepares it on
// the transaction's own connection. A query first seen inside a transaction is run
// unprepared and prepared after the commit (prepareMissed): preparing it on the pool
// during the transaction would take a second connection while one is held, which can
// wait forever once every connection is in a transaction.
type stmtCache struct {
	sql    *sql.DB
	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	closed bool
}

func newStmtCache(sdb *sql.DB) *stmtCache {
	return &stmtCache{sql: sdb, stmts: make(map[string]*sql.Stmt)}
}

// cacheable reports whether q is worth keeping prepared: a query or a change of rows.
// Schema changes (migrations, grants) run once and are left out.
func cacheable(q string) bool {
	q = strings.TrimLeft(q, " \t\r\n")
	for _, verb := range [...]string{"SELECT", "INSERT", "UPDATE", "DELETE", "WITH"} {
		if len(q) > len(verb) && strings.EqualFold(q[:len(verb)], verb) {
			return true
		}
	}
	return false
}

// lookup returns q's statement if it is prepared already.
func (c *stmtCache) lookup(q string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[q]
}

// get returns q's statement, preparing it on the pool when it is new; nil (run q
// unprepared) when q is not to be cached, does not prepare, or the cache is full or
// closed. The caller must hold no
// connection of the pool (see stmtCache).
func (c *stmtCache) get(ctx context.Context, q string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	st, seen := c.stmts[q]
	skip := c.closed || len(c.stmts) >= stmtCacheMax
	c.mu.Unlock()
	if seen || skip || !cacheable(q) {
		return st
	}
	return c.prepare(ctx, q)
}

// prepare prepares q on the pool and keeps it. Two callers may prepare the same query
// at once: the first to finish keeps its statement, the other closes its own.
func (c *stmtCache) prepare(ctx context.Context, q string) *sql.Stmt {
	st, err := c.sql.PrepareContext(ctx, q)
	if err != nil {
		// The query runs unprepared and fails there, if it is wrong, with the error
		// in its place; a preparation that failed for a passing reason is tried again.
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if kept, seen := c.stmts[q]; seen || c.closed || len(c.stmts) >= stmtCacheMax {
		_ = st.Close()
		return kept
	}
	c.stmts[q] = st
	return st
}

// prepareMissed prepares the queries a committed transaction ran unprepared.
func (c *stmtCache) prepareMissed(ctx context.Context, missed []string) {
	for _, q := range missed {
		c.get(ctx, q)
	}
}

// close closes every statement; later lookups find none and queries run unprepared
// (against a closed database, so they fail as before).
func (c *stmtCache) close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for q, st := range c.stmts {
		errs = append(errs, st.Close())
		delete(c.stmts, q)
	}
	return errors.Join(errs...)
}

// len is how many statements the cache holds: for tests.
func (c *stmtCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.stmts)
}
