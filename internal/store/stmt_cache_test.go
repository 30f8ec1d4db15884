package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// kvStore is a fresh SQLite store with a table of its own, so the statements these tests
// cache are theirs alone.
func kvStore(t *testing.T) *Store {
	t.Helper()
	st := openAt(t, freshURL(t, sqlite))
	_, err := st.Exec(context.Background(), `CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)`)
	must(t, err)
	return st
}

func (s *Store) kvGet(ctx context.Context, k string) (int64, error) {
	var v int64
	err := s.db.QueryRowContext(ctx, `SELECT v FROM kv WHERE k = ?`, k).Scan(&v)
	return v, err
}

const kvAdd = `INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = kv.v + excluded.v`

// A statement run on the pool is prepared once and kept; one first run in a transaction
// is prepared once the transaction commits, and later transactions use it; schema
// changes are left out.
func TestStmtCacheKeepsStatements(t *testing.T) {
	st := kvStore(t)
	ctx := context.Background()
	if st.db.stmts.lookup(`CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)`) != nil {
		t.Error("a schema change was kept prepared")
	}
	must(t, st.inTx(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, kvAdd, "a", 1)
		return err
	}))
	first := st.db.stmts.lookup(kvAdd)
	if first == nil {
		t.Fatal("a statement the committed transaction ran is not prepared after it")
	}
	for i := 0; i < 3; i++ {
		must(t, st.inTx(ctx, func(tx *txn) error {
			_, err := tx.ExecContext(ctx, kvAdd, "a", 1)
			return err
		}))
	}
	if st.db.stmts.lookup(kvAdd) != first {
		t.Error("the statement was prepared again")
	}
	v, err := st.kvGet(ctx, "a")
	must(t, err)
	if v != 4 {
		t.Errorf("v = %d after four additions of 1 through the prepared statement, want 4", v)
	}
	read := st.db.stmts.lookup(`SELECT v FROM kv WHERE k = ?`)
	if read == nil {
		t.Fatal("a read on the pool was not kept prepared")
	}
	if _, err := st.kvGet(ctx, "a"); err != nil || st.db.stmts.lookup(`SELECT v FROM kv WHERE k = ?`) != read {
		t.Errorf("a second read: %v, or prepared again", err)
	}
}

// A transaction that fails prepares nothing, and a statement that does not prepare
// fails where it runs, with the database's error.
func TestStmtCacheFailures(t *testing.T) {
	st := kvStore(t)
	ctx := context.Background()
	const q = `UPDATE kv SET v = v + 1 WHERE k = ?`
	boom := errors.New("boom")
	err := st.inTx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, q, "a"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("inTx = %v, want boom", err)
	}
	if st.db.stmts.lookup(q) != nil {
		t.Error("a rolled-back transaction's statement was prepared")
	}
	if _, err := st.db.ExecContext(ctx, `SELECT nope FROM kv`); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("a wrong statement: %v, want the database's error naming the column", err)
	}
	if st.db.stmts.lookup(`SELECT nope FROM kv`) != nil {
		t.Error("a statement that does not prepare was kept")
	}
}

// A kept statement follows the schema when another connection (here another store, as
// another process) changes it.
func TestStmtCacheFollowsSchemaChanges(t *testing.T) {
	st := kvStore(t)
	ctx := context.Background()
	_, err := st.db.ExecContext(ctx, kvAdd, "a", 1)
	must(t, err)
	const all = `SELECT * FROM kv`
	cols := func() []string {
		t.Helper()
		rows, err := st.db.QueryContext(ctx, all)
		must(t, err)
		defer rows.Close()
		c, err := rows.Columns()
		must(t, err)
		return c
	}
	if got := cols(); len(got) != 2 {
		t.Fatalf("columns %v", got)
	}
	other := reopen(t, st)
	_, err = other.Exec(ctx, `ALTER TABLE kv ADD COLUMN w INTEGER NOT NULL DEFAULT 7`)
	must(t, err)
	if got := cols(); len(got) != 3 {
		t.Errorf("columns after another connection added one: %v, want 3", got)
	}
	if st.db.stmts.lookup(all) == nil {
		t.Error("the statement was not kept")
	}
}

// Close closes every kept statement; the store's queries then fail as on a closed
// database, and nothing is prepared any more.
func TestStmtCacheClosedWithTheStore(t *testing.T) {
	st := kvStore(t)
	ctx := context.Background()
	if _, err := st.kvGet(ctx, "a"); err == nil {
		t.Fatal("read a missing row")
	}
	kept := st.db.stmts.lookup(`SELECT v FROM kv WHERE k = ?`)
	if kept == nil {
		t.Fatal("the read was not kept prepared")
	}
	must(t, st.Close())
	if n := st.db.stmts.len(); n != 0 {
		t.Errorf("%d statements left after Close", n)
	}
	var v int64
	if err := kept.QueryRowContext(ctx, "a").Scan(&v); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("the kept statement after Close: %v, want it closed", err)
	}
	if _, err := st.kvGet(ctx, "a"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a read after Close: %v, want the closed database's error", err)
	}
	if n := st.db.stmts.len(); n != 0 {
		t.Errorf("a read after Close prepared %d statements", n)
	}
}

// Many goroutines share the kept statements, on the pool and in transactions, more of
// them than the pool has connections (run with -race).
func TestStmtCacheConcurrentUse(t *testing.T) {
	st := kvStore(t)
	ctx := context.Background()
	const workers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := fmt.Sprintf("k%d", w%3)
			for i := 0; i < each; i++ {
				err := st.inTx(ctx, func(tx *txn) error {
					_, err := tx.ExecContext(ctx, kvAdd, k, 1)
					return err
				})
				if err == nil {
					_, err = st.kvGet(ctx, k)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var sum int64
	for k := 0; k < 3; k++ {
		v, err := st.kvGet(ctx, fmt.Sprintf("k%d", k))
		must(t, err)
		sum += v
	}
	if sum != workers*each {
		t.Errorf("sum %d, want %d", sum, workers*each)
	}
}

// The cache is SQLite's: pgx keeps PostgreSQL's statements prepared itself.
func TestStmtCacheOnlyOnSQLite(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		if (st.db.stmts != nil) != (st.db.dialect == sqlite) {
			t.Errorf("statement cache %v on %s", st.db.stmts != nil, st.db.dialect)
		}
	})
}
