// Package store is the control-plane database: what `terraform apply` publishes (sandbox
// providers, environments, snapshots, secrets, agents) and the harness's runtime state
// (sessions, their event logs, runs, sandboxes). SQLite (pure Go, WAL) is the only
// database today; the SQL is kept to the subset PostgreSQL shares.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Errors callers branch on. They are wrapped with context, so use errors.Is.
var (
	ErrNotFound      = errors.New("not found")
	ErrAlreadyExists = errors.New("already exists")
	// ErrInUse means a row is still referenced (for example an environment by an agent).
	ErrInUse = errors.New("in use")
	// ErrRunning means a session already has a running run: a second one may not start.
	ErrRunning = errors.New("a run of the session is already running")
)

// Store is a handle on the control-plane database.
type Store struct {
	db   *sql.DB
	path string // the SQLite file, empty for other databases
	now  func() time.Time
}

// DefaultPath is the SQLite file used when no database URL is configured:
// $XDG_DATA_HOME/trueforge/trueforge.db, else ~/.local/share/trueforge/trueforge.db.
func DefaultPath() (string, error) {
	dir := os.Getenv("XDG_DATA_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("finding the user's data dir: %w", err)
		}
		dir = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(dir, "trueforge", "trueforge.db"), nil
}

// SQLitePath returns the file named by a database URL: "sqlite:///abs/path.db",
// "sqlite://rel/path.db", "file:path.db" or a plain path.
func SQLitePath(databaseURL string) (string, error) {
	switch {
	case databaseURL == "":
		return DefaultPath()
	case strings.HasPrefix(databaseURL, "postgres://"), strings.HasPrefix(databaseURL, "postgresql://"):
		return "", fmt.Errorf("database URL %q: PostgreSQL is not supported by this build yet; use an SQLite path or sqlite:// URL", redactURL(databaseURL))
	case strings.HasPrefix(databaseURL, "sqlite://"):
		return strings.TrimPrefix(databaseURL, "sqlite://"), nil
	case strings.HasPrefix(databaseURL, "file:"):
		p := strings.TrimPrefix(databaseURL, "file:")
		if i := strings.IndexByte(p, '?'); i >= 0 {
			p = p[:i]
		}
		return p, nil
	case strings.Contains(databaseURL, "://"):
		return "", fmt.Errorf("database URL %q: unknown scheme; use an SQLite path or sqlite:// URL", redactURL(databaseURL))
	}
	return databaseURL, nil
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<unparseable>"
	}
	return u.Redacted()
}

// Open opens (creating if needed) the database named by databaseURL and migrates it to
// the latest schema.
func Open(ctx context.Context, databaseURL string) (*Store, error) {
	path, err := SQLitePath(databaseURL)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating the directory of database %s: %w", path, err)
	}
	// WAL lets readers (the harness) run beside a writer (apply); busy_timeout makes
	// concurrent writers wait instead of failing; foreign keys carry referential rules.
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("opening database %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	s := &Store{db: db, path: path, now: time.Now}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Path is the SQLite file of this store.
func (s *Store) Path() string { return s.path }

// Dir is the directory that holds the database; backends keep their data beside it.
func (s *Store) Dir() string { return filepath.Dir(s.path) }

// Close releases the database.
func (s *Store) Close() error { return s.db.Close() }

// DB exposes the handle for tests that change rows out of band (drift tests).
func (s *Store) DB() *sql.DB { return s.db }

func (s *Store) stamp() int64 { return s.now().UnixMilli() }

// inTx runs fn in a transaction and commits when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	return nil
}

// isConstraint reports whether err is a unique or foreign key violation.
func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

func isForeignKey(err error) bool {
	return err != nil && strings.Contains(err.Error(), "FOREIGN KEY constraint failed")
}
