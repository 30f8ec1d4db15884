// Package pgtest gives tests a real PostgreSQL: a throwaway cluster that the test binary
// starts on first use (initdb into a temporary directory as an unprivileged user,
// listening on a unix socket only, no TCP port) and stops in TestMain, with a fresh
// database per test.
//
// TRUEFORGE_TEST_POSTGRES, when set, is the URL of a superuser on a cluster to use
// instead (nothing is started). Without PostgreSQL's binaries the tests that need it are
// skipped, unless TRUEFORGE_REQUIRE_POSTGRES=1 (set by scripts/test.sh, which installs
// PostgreSQL), where they fail: in `make test` nothing is skipped.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/trueforge/terraform-provider-trueforge/internal/asuser"
)

// Env names the superuser URL of an existing cluster to use instead of starting one.
const Env = "TRUEFORGE_TEST_POSTGRES"

// RequireEnv, set to 1, makes a missing PostgreSQL a failure instead of a skip.
const RequireEnv = "TRUEFORGE_REQUIRE_POSTGRES"

// Superuser is the name of the cluster's superuser.
const Superuser = "postgres"

// Cluster is a running PostgreSQL.
type Cluster struct {
	// admin is the superuser's URL (its database is "postgres").
	admin *url.URL
	dir   string    // the temporary directory holding data and socket; "" when not ours
	proc  *exec.Cmd // the postmaster we started, nil when not ours
	db    *sql.DB
}

var (
	mu      sync.Mutex
	shared  *Cluster
	started error // why the cluster could not be started, once it could not
)

// Get returns the process's cluster, starting it on first use. It skips tb (or fails it,
// under TRUEFORGE_REQUIRE_POSTGRES=1) when there is no PostgreSQL to run.
func Get(tb testing.TB) *Cluster {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if shared == nil && started == nil {
		shared, started = start()
	}
	if started != nil {
		if os.Getenv(RequireEnv) == "1" {
			tb.Fatalf("PostgreSQL is required (%s=1) but could not be started: %v", RequireEnv, started)
		}
		tb.Skipf("skipping: no PostgreSQL to test against (%v); install the postgresql package, or set %s", started, Env)
	}
	return shared
}

// Stop stops the cluster the process started, if any, and removes its files. TestMain
// calls it after m.Run.
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	if shared == nil {
		return
	}
	shared.Close()
	shared = nil
}

// Main is the TestMain of a package whose tests use the cluster and need nothing else
// around m.Run: it runs the tests, stops the cluster, and exits with their status.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Start starts a cluster of the caller's own, outside any test: for tools that need a
// throwaway PostgreSQL (tools/benchpg, which scripts/bench.sh runs). Close stops it.
func Start() (*Cluster, error) { return start() }

// Close stops the cluster, if it is one that was started here, and removes its files.
func (c *Cluster) Close() {
	c.db.Close()
	if c.proc != nil {
		// SIGINT is PostgreSQL's fast shutdown: connections are ended, nothing is
		// kept for a restart that will not come.
		_ = c.proc.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = c.proc.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = c.proc.Process.Kill()
			<-done
		}
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

// CreateDatabase creates database name and returns the superuser's URL for it.
func (c *Cluster) CreateDatabase(name string) (string, error) {
	if _, err := c.db.Exec(`CREATE DATABASE ` + name); err != nil {
		return "", fmt.Errorf("creating database %s: %w", name, err)
	}
	return c.URL(name, Superuser), nil
}

// Database creates a fresh, empty database for tb, dropped when tb ends, and returns the
// superuser's URL for it.
func (c *Cluster) Database(tb testing.TB) string {
	tb.Helper()
	name := "tf_" + randomHex(6)
	if _, err := c.db.Exec(`CREATE DATABASE ` + name); err != nil {
		tb.Fatalf("creating database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		if _, err := c.db.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`); err != nil {
			tb.Logf("dropping database %s: %v", name, err)
		}
	})
	return c.URL(name, Superuser)
}

// Name is the database a URL names.
func Name(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(u.Path, "/")
}

// URL is the URL with which role connects to database (the cluster trusts local
// connections, so it needs no password).
func (c *Cluster) URL(database, role string) string {
	u := *c.admin
	u.User = url.User(role)
	u.Path = "/" + database
	return u.String()
}

// Exec runs statements as the superuser in database.
func (c *Cluster) Exec(tb testing.TB, database, statements string) {
	tb.Helper()
	db, err := sql.Open("pgx", c.URL(database, Superuser))
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(statements); err != nil {
		tb.Fatalf("as %s in %s: %v\n%s", Superuser, database, err, statements)
	}
}

// Role creates a login role named prefix plus a random suffix (roles belong to the
// whole cluster, so tests must not share names), dropped when tb ends.
func (c *Cluster) Role(tb testing.TB, prefix string) string {
	tb.Helper()
	name := prefix + "_" + randomHex(4)
	if _, err := c.db.Exec(`CREATE ROLE ` + name + ` LOGIN`); err != nil {
		tb.Fatalf("creating role %s: %v", name, err)
	}
	tb.Cleanup(func() { c.DropRole(tb, name) })
	return name
}

// DropRole drops role after removing what it owns and was granted in every database.
func (c *Cluster) DropRole(tb testing.TB, role string) {
	rows, err := c.db.Query(`SELECT datname FROM pg_database WHERE datallowconn AND datname NOT IN ('template0', 'template1')`)
	if err != nil {
		tb.Logf("listing databases: %v", err)
		return
	}
	var dbs []string
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		dbs = append(dbs, n)
	}
	rows.Close()
	for _, d := range dbs {
		db, err := sql.Open("pgx", c.URL(d, Superuser))
		if err != nil {
			continue
		}
		_, _ = db.Exec(`DROP OWNED BY ` + role)
		db.Close()
	}
	if _, err := c.db.Exec(`DROP ROLE IF EXISTS ` + role); err != nil {
		tb.Logf("dropping role %s: %v", role, err)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// start connects to the cluster named by TRUEFORGE_TEST_POSTGRES, or starts one.
func start() (*Cluster, error) {
	if v := os.Getenv(Env); v != "" {
		u, err := url.Parse(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Env, err)
		}
		return connect(&Cluster{admin: u})
	}
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "trueforge-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	fail := func(err error) (*Cluster, error) {
		if c.proc != nil {
			_ = c.proc.Process.Kill()
			_ = c.proc.Wait()
		}
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// PostgreSQL refuses to run as root: as root, the cluster belongs to the test
	// account (asuser.UID).
	cred, err := runAs(dir)
	if err != nil {
		return fail(err)
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", Superuser, "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = cred
	initdb.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	// A throwaway cluster: durability is traded for speed, and only a unix socket in
	// the temporary directory listens.
	pgArgs := []string{"-D", data, "-k", dir, "-c", "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=64MB", "-c", "log_min_messages=FATAL"}
	proc := exec.Command(filepath.Join(bin, "postgres"), pgArgs...)
	proc.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return fail(err)
	}
	defer logf.Close()
	proc.Stdout, proc.Stderr = logf, logf
	proc.SysProcAttr = cred
	if proc.SysProcAttr == nil {
		proc.SysProcAttr = &syscall.SysProcAttr{}
	}
	// The cluster dies with the test binary even when that is killed: the parent-death
	// signal is tied to the thread that started it, so that thread never exits.
	proc.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	startErr := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := proc.Start()
		startErr <- err
		if err == nil {
			select {} // keep this thread, and so the parent-death signal's link, alive
		}
	}()
	if err := <-startErr; err != nil {
		return fail(fmt.Errorf("starting postgres: %w", err))
	}
	c.proc = proc
	c.admin = &url.URL{Scheme: "postgres", User: url.User(Superuser), Path: "/postgres",
		RawQuery: url.Values{"host": {dir}, "sslmode": {"disable"}}.Encode()}
	deadline := time.Now().Add(60 * time.Second)
	for {
		cc, err := connect(&Cluster{admin: c.admin})
		if err == nil {
			c.db = cc.db
			return c, nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			return fail(fmt.Errorf("postgres did not accept connections within 60s: %v\n%s", err, log))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func connect(c *Cluster) (*Cluster, error) {
	db, err := sql.Open("pgx", c.admin.String())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	c.db = db
	return c, nil
}

// binDir finds PostgreSQL's server binaries: on PATH, else in Debian's
// /usr/lib/postgresql/<version>/bin (the newest), which is not on PATH.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if resolved, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(resolved), nil
		}
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("PostgreSQL's initdb is neither on PATH nor in /usr/lib/postgresql/*/bin")
}

func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// runAs returns the credentials the cluster runs with, and gives it dir: none when the
// tests do not run as root, else the unprivileged test account.
func runAs(dir string) (*syscall.SysProcAttr, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	uid := asuser.UID()
	if err := os.Chown(dir, int(uid), int(uid)); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}, nil
}
