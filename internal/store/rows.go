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
		return v, notFound(format, args...)
	case err != nil:
		return v, fmt.Errorf(doing+" "+format+": %w", append(args, err)...)
	}
	return v, nil
}

// getRow reads the published row whose key is key: from the configuration the context
// caches (cached, the configSnapshot's lookup of that table) when it caches one, else
// from the database with query (which takes key), scanned by scan. The row is named as
// format says ("agent %q") in its errors, both ways.
func getRow[T any](ctx context.Context, s *Store, cached func(*configSnapshot, string) (T, error),
	scan func(scanner) (T, error), query, key, format string) (T, error) {
	if c := s.config(ctx); c != nil {
		return cached(c, key)
	}
	v, err := scan(s.db.QueryRowContext(ctx, query, key))
	return found(v, err, "reading", format, key)
}

// changedOne is the error of a statement (its res and err) that changes the one row
// format and args name ("agent %q", name): a failure is wrapped as doing ("updating",
// "recording the state of") to that row, and no row changed is ErrNotFound naming it.
func changedOne(res sql.Result, err error, doing, format string, args ...any) error {
	if err != nil {
		return fmt.Errorf(doing+" "+format+": %w", append(args, err)...)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound(format, args...)
	}
	return nil
}

// changed reports whether a statement (its res and err) that changes at most one row
// changed it: a compare-and-swap's answer. A failure is wrapped as doing, a format with
// args ("renewing lease %q", name).
func changed(res sql.Result, err error, doing string, args ...any) (bool, error) {
	if err != nil {
		return false, fmt.Errorf(doing+": %w", append(args, err)...)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf(doing+": %w", append(args, err)...)
	}
	return n == 1, nil
}

// inserted is the error of an insert of the row format and args name ("agent %q",
// name): ErrAlreadyExists when a row with its key exists, missing (nil: none expected)
// when a row it references does not exist, and any other failure wrapped as creating it.
func inserted(err, missing error, format string, args ...any) error {
	if isUnique(err) {
		return fmt.Errorf(format+": %w", append(args, ErrAlreadyExists)...)
	}
	return wrote(err, missing, "creating "+format, args...)
}

// wrote is the error of a write: missing (nil: none expected) when a row it references
// does not exist, and any other failure wrapped as doing, a format with args
// ("recording the sandbox of session %q", id).
func wrote(err, missing error, doing string, args ...any) error {
	switch {
	case err == nil:
		return nil
	case missing != nil && isForeignKey(err):
		return missing
	}
	return fmt.Errorf(doing+": %w", append(args, err)...)
}

// notFound is ErrNotFound naming what was not found as format and args do.
func notFound(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrNotFound)...)
}
