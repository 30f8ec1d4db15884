// Package storetest gives tests of the store's users a store to test against (Open) and
// the database errors that are hard to meet by chance.
package storetest

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite" // the "sqlite" driver
)

// BusyError is SQLite's refusal of a write while another connection holds the database's
// lock (SQLITE_BUSY), as the store would return it past its busy timeout.
func BusyError(tb testing.TB) error {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "busy.db")
	ctx := context.Background()
	holder, err := sql.Open("sqlite", path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { holder.Close() })
	conn, err := holder.Conn(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	for _, q := range []string{"CREATE TABLE t (x INTEGER)", "BEGIN EXCLUSIVE"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			tb.Fatal(err)
		}
	}
	other, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { other.Close() })
	if _, err = other.ExecContext(ctx, "INSERT INTO t VALUES (1)"); err == nil {
		tb.Fatal("a write past an exclusive lock succeeded")
	}
	return err
}
