package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// scanner is a row to read: a *sql.Row, or the current row of *sql.Rows. Each table's
// scan function (scanAgent, scanEnv, ...) takes one, so that one function reads the
// table's rows for a lookup and for a list alike.
type scanner interface {
	Scan(dest ...any) error
}

// queryRows runs query and reads every row it returns with scan, in order: the loop
// every list of the store is. A failure of the query, of a scan or of the iteration is
// returned as it is, for the caller to say what it was listing.
func queryRows[T any](ctx context.Context, q querier, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// scanString reads a row of one text column, for queryRows over names and ids.
func scanString(sc scanner) (string, error) {
	var s string
	err := sc.Scan(&s)
	return s, err
}

// found is what a lookup of one row returns: v, read from the row (err is the scan's),
// and no error; when there is no row, ErrNotFound naming the row as format and args do
// ("agent %q", name); any other failure wrapped as doing ("reading", "reading the host
// of") to that row.
func found[T any](v T, err error, doing, format string, args ...any) (T, error) {
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return v, fmt.Errorf(format+": %w", append(args, ErrNotFound)...)
	case err != nil:
		return v, fmt.Errorf(doing+" "+format+": %w", append(args, err)...)
	}
	return v, nil
}

// changedOne is the error of a statement (its res and err) that changes the one row
// format and args name ("agent %q", name): a failure is wrapped as doing ("updating",
// "recording the state of") to that row, and no row changed is ErrNotFound naming it.
func changedOne(res sql.Result, err error, doing, format string, args ...any) error {
	if err != nil {
		return fmt.Errorf(doing+" "+format+": %w", append(args, err)...)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf(format+": %w", append(args, ErrNotFound)...)
	}
	return nil
}
