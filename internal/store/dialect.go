package store

import (
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
	sqlitedrv "modernc.org/sqlite"
)

// dialect is what differs between the two databases the store runs on. The store's SQL
// is written once, in the subset both share, with ? placeholders; a dialect rewrites
// what must differ (placeholders for PostgreSQL, column types in migrations) and reads
// each database's errors.
type dialect int

const (
	sqlite dialect = iota
	postgres
)

func (d dialect) String() string {
	if d == postgres {
		return "PostgreSQL"
	}
	return "SQLite"
}

// rebound caches PostgreSQL's form of each query: the store's queries are a fixed set of
// literals, so each is rewritten once per process.
var rebound sync.Map // string -> string

// rebind returns q with its ? placeholders numbered ($1, $2, ...) for PostgreSQL. A ?
// inside a quoted literal or identifier is left alone.
func (d dialect) rebind(q string) string {
	if d != postgres || !strings.Contains(q, "?") {
		return q
	}
	if v, ok := rebound.Load(q); ok {
		return v.(string)
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	out := b.String()
	rebound.Store(q, out)
	return out
}

// sqlState is the SQLSTATE of a PostgreSQL error, "" for any other error.
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// isUnique reports whether err is a unique-constraint violation.
func isUnique(err error) bool {
	return err != nil && (sqlState(err) == "23505" || strings.Contains(err.Error(), "UNIQUE constraint failed"))
}

// isForeignKey reports whether err is a foreign-key violation.
func isForeignKey(err error) bool {
	return err != nil && (sqlState(err) == "23503" || strings.Contains(err.Error(), "FOREIGN KEY constraint failed"))
}

// isRetryable reports whether a transaction failed only because another one ran at the
// same time (a serialization failure or a deadlock PostgreSQL broke): run again, it can
// succeed.
func isRetryable(err error) bool {
	switch sqlState(err) {
	case "40001", "40P01":
		return true
	}
	return false
}

// isPermission reports whether the database refused err for want of a privilege, or
// because row-level security kept a row from the caller.
func isPermission(err error) bool {
	switch sqlState(err) {
	case "42501": // insufficient_privilege, also raised by row-level security policies
		return true
	}
	return false
}

// isUndefinedTable reports whether err names a table that does not exist.
func isUndefinedTable(err error) bool {
	return err != nil && (sqlState(err) == "42P01" || strings.Contains(err.Error(), "no such table"))
}

// IsBusy reports whether SQLite refused err because another connection held a lock past
// the busy timeout: SQLITE_BUSY or SQLITE_LOCKED, in any of their extended codes (the
// primary code is the low byte).
func IsBusy(err error) bool {
	var e *sqlitedrv.Error
	if !errors.As(err, &e) {
		return false
	}
	const sqliteBusy, sqliteLocked = 5, 6 // SQLITE_BUSY, SQLITE_LOCKED (sqlite3.h)
	switch e.Code() & 0xff {
	case sqliteBusy, sqliteLocked:
		return true
	}
	return false
}
