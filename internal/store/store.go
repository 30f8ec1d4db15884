// Package store is the control-plane database: what `terraform apply` publishes (sandbox
// providers, environments, snapshots, secrets, agents) and the harness's runtime state
// (sessions, their event logs, runs, sandboxes).
//
// Two databases serve it with one schema and one migration history: SQLite (pure Go,
// WAL), a file on the machine that applies, for one operator; and PostgreSQL (pgx), for a
// control plane shared by CI runners, teams and harness replicas. On PostgreSQL the owner
// of what a connection writes is the role it authenticates as, and row-level security
// keeps each role to its own rows (see migrate.go and roles.go).
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

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the "sqlite" driver
)

// Errors callers branch on. They are wrapped with context, so use errors.Is.
var (
	ErrNotFound      = errors.New("not found")
	ErrAlreadyExists = errors.New("already exists")
	// ErrInUse means a row is still referenced (for example an environment by an agent).
	ErrInUse = errors.New("in use")
	// ErrRunning means a session already has a running run: a second one may not start.
	ErrRunning = errors.New("a run of the session is already running")
	// ErrForbidden means the database refused the connection's role: a table its kind of
	// role may not touch, or a row that belongs to another role (PostgreSQL's row-level
	// security). Updates and deletes of other roles' rows do not fail this way: those
	// rows are invisible to them, so they report ErrNotFound.
	ErrForbidden = errors.New("not permitted for this database role")
)

// Store is a handle on the control-plane database.
type Store struct {
	db   *db
	path string // the SQLite file, empty on PostgreSQL
	// role is the PostgreSQL role the connection authenticates as: the owner of what
	// it writes. Empty on SQLite, where the owner is what the caller claims.
	role string
	// dataDir is where this machine keeps the files of a control plane on PostgreSQL
	// (local snapshots and sandboxes, egress sockets): see DataDir.
	dataDir string
	// source is the URL or path the store was opened with (tests reopen it).
	source string
	now    func() time.Time
	// cache, when set (EnableConfigCache), serves reads of the configuration from one
	// consistent read until the next write (config_cache.go).
	cache *configCache
	// feed tells the readers of sessions' logs that they grew (event_feed.go); shared
	// by the views of the store (Fresh).
	feed *eventFeed
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
	case IsPostgres(databaseURL):
		return "", fmt.Errorf("database URL %q is a PostgreSQL URL, not an SQLite file", redactURL(databaseURL))
	case strings.HasPrefix(databaseURL, "sqlite://"):
		return strings.TrimPrefix(databaseURL, "sqlite://"), nil
	case strings.HasPrefix(databaseURL, "file:"):
		p := strings.TrimPrefix(databaseURL, "file:")
		if i := strings.IndexByte(p, '?'); i >= 0 {
			p = p[:i]
		}
		return p, nil
	case strings.Contains(databaseURL, "://"):
		return "", fmt.Errorf("database URL %q: unknown scheme; use postgres:// (or postgresql://) for PostgreSQL, or an SQLite path or sqlite:// URL", redactURL(databaseURL))
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

// IsPostgres reports whether databaseURL names a PostgreSQL database.
func IsPostgres(databaseURL string) bool {
	return strings.HasPrefix(databaseURL, "postgres://") || strings.HasPrefix(databaseURL, "postgresql://")
}

// sqliteConns is how many connections a SQLite store opens, and keeps open while idle:
// each holds the store's prepared statements (stmtCache), which a new one prepares again.
const sqliteConns = 4

// Open opens the database named by databaseURL (a postgres:// or postgresql:// URL, else
// an SQLite file, created if needed) and migrates it to the latest schema.
func Open(ctx context.Context, databaseURL string) (*Store, error) {
	if IsPostgres(databaseURL) {
		return openPostgres(ctx, databaseURL)
	}
	path, err := SQLitePath(databaseURL)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating the directory of database %s: %w", path, err)
	}
	if err := secureSQLiteFiles(path); err != nil {
		return nil, err
	}
	// WAL lets readers (the harness) run beside a writer (apply); busy_timeout makes
	// concurrent writers wait instead of failing; foreign keys carry referential rules.
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	sdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("opening database %s: %w", path, err)
	}
	sdb.SetMaxOpenConns(sqliteConns)
	sdb.SetMaxIdleConns(sqliteConns) // database/sql would close all but 2 when idle
	s := &Store{db: &db{sql: sdb, dialect: sqlite, log: openQueryLog(), stmts: newStmtCache(sdb)}, path: path, source: databaseURL, now: time.Now,
		feed: newEventFeed("")}
	// A new file's first connections switch it to WAL, which SQLite may refuse with
	// SQLITE_BUSY without waiting (busy_timeout does not cover it) while another process
	// does the same: processes that open a new file at once retry for a while.
	err = s.migrate(ctx)
	for deadline := time.Now().Add(10 * time.Second); IsBusy(err) && time.Now().Before(deadline); err = s.migrate(ctx) {
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		_ = s.db.stmts.close()
		sdb.Close()
		return nil, err
	}
	return s, nil
}

// openPostgres connects to a PostgreSQL control plane as the URL's role and migrates it
// when its schema is behind (which needs a role that may create tables: see migrate).
func openPostgres(ctx context.Context, databaseURL string) (*Store, error) {
	sdb, err := sql.Open("pgx", databaseURL)
	if err != nil {
		return nil, fmt.Errorf("opening database %s: %w", redactURL(databaseURL), err)
	}
	sdb.SetMaxOpenConns(8)
	sdb.SetConnMaxIdleTime(5 * time.Minute)
	s := &Store{db: &db{sql: sdb, dialect: postgres, log: openQueryLog()}, source: databaseURL, now: time.Now,
		feed: newEventFeed(databaseURL)}
	fail := func(err error) (*Store, error) {
		sdb.Close()
		return nil, err
	}
	if err := s.db.QueryRowContext(ctx, `SELECT current_user`).Scan(&s.role); err != nil {
		return fail(fmt.Errorf("connecting to database %s: %w", redactURL(databaseURL), err))
	}
	if s.dataDir, err = DefaultDataDir(); err != nil {
		return fail(err)
	}
	if err := s.migrate(ctx); err != nil {
		return fail(err)
	}
	return s, nil
}

// DataDirEnv names the directory where a machine keeps the files of a control plane whose
// database is on PostgreSQL; unset, it is DefaultDataDir.
const DataDirEnv = "TRUEFORGE_DATA_DIR"

// DefaultDataDir is TRUEFORGE_DATA_DIR, else $XDG_DATA_HOME/trueforge, else
// ~/.local/share/trueforge: where DefaultPath keeps its SQLite file too.
func DefaultDataDir() (string, error) {
	if d := os.Getenv(DataDirEnv); d != "" {
		return filepath.Abs(d)
	}
	p, err := DefaultPath()
	if err != nil {
		return "", err
	}
	return filepath.Dir(p), nil
}

// Path is the SQLite file of this store ("" on PostgreSQL).
func (s *Store) Path() string { return s.path }

// Dir is the directory where this machine keeps the control plane's files: beside the
// SQLite file, or DefaultDataDir for a database on PostgreSQL.
func (s *Store) Dir() string {
	if s.db.dialect == postgres {
		return s.dataDir
	}
	return filepath.Dir(s.path)
}

// Shared reports whether the database is a server that other machines may use too
// (PostgreSQL): then nothing about the control plane may live only in local files.
func (s *Store) Shared() bool { return s.db.dialect == postgres }

// Dialect names the database: "SQLite" or "PostgreSQL".
func (s *Store) Dialect() string { return s.db.dialect.String() }

// Role is the PostgreSQL role this store authenticates as, the owner of what it writes;
// "" on SQLite, where owners are what callers claim.
func (s *Store) Role() string { return s.role }

// Close releases the database, its prepared statements first.
func (s *Store) Close() error {
	s.feed.close()
	return errors.Join(s.db.stmts.close(), s.db.sql.Close())
}

// DB exposes the handle for tests that change rows out of band (drift tests). Its
// queries use the database's own placeholders; Exec takes the store's.
func (s *Store) DB() *sql.DB { return s.db.sql }

// Exec runs one statement written with ? placeholders, on either database: for tests and
// tools that change rows out of band.
func (s *Store) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return s.db.ExecContext(ctx, query, args...)
}

// QueryRow runs one query written with ? placeholders, on either database.
func (s *Store) QueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return s.db.QueryRowContext(ctx, query, args...)
}

func (s *Store) stamp() int64 { return s.now().UnixMilli() }
