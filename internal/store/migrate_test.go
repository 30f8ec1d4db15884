package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
)

// Applies that start at once on a new database migrate it once: every migration is
// recorded once, and every process opens it.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		for round := 0; round < 5; round++ {
			url := freshURL(t, d)
			const n = 6
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					st, err := Open(context.Background(), url)
					if err == nil {
						st.Close()
					}
					errs[i] = err
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("round %d: open %d: %v", round, i, err)
				}
			}
			st := openAt(t, url)
			var rows, distinct int
			must(t, st.QueryRow(context.Background(), `SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations`).Scan(&rows, &distinct))
			if rows != len(migrations) || distinct != len(migrations) {
				t.Fatalf("round %d: %d migration records (%d distinct); want %d", round, rows, distinct, len(migrations))
			}
		}
	})
}

// A database that a newer release migrated is refused by this one, naming both versions,
// and left as it is.
func TestNewerSchemaRefused(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		future := len(migrations) + 3
		if _, err := st.Exec(ctx, `INSERT INTO schema_migrations(version, applied_at) VALUES (?, 0)`, future); err != nil {
			t.Fatal(err)
		}
		_, err := Open(ctx, st.source)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("version %d", future)) || !strings.Contains(err.Error(), fmt.Sprintf("version %d", len(migrations))) {
			t.Fatalf("opening a database at schema %d: %v; want a refusal naming %d and %d", future, err, future, len(migrations))
		}
		if v, _ := st.SchemaVersion(ctx); v != future {
			t.Fatalf("schema version %d after the refusal; want it untouched at %d", v, future)
		}
	})
}

// A role that may not change the schema opens a current database, and is refused an old
// one with what to do, not with a bare "permission denied".
func TestMigrationNeedsTheSchemaOwner(t *testing.T) {
	c := pgtest.Get(t)
	admin := c.Database(t)
	dbName := pgtest.Name(admin)
	role := c.Role(t, "team")
	c.Exec(t, dbName, `REVOKE CREATE ON SCHEMA public FROM PUBLIC; GRANT USAGE ON SCHEMA public TO `+role)
	ctx := context.Background()
	_, err := Open(ctx, c.URL(dbName, role))
	if err == nil || !strings.Contains(err.Error(), "trueforge-harness db migrate") || !strings.Contains(err.Error(), fmt.Sprintf("needs version %d", len(migrations))) {
		t.Fatalf("a role without CREATE opening an empty database: %v; want the migrate hint and the versions", err)
	}
	owner := openAt(t, admin)
	c.Exec(t, dbName, `GRANT SELECT ON schema_migrations TO `+role)
	st, err := Open(ctx, c.URL(dbName, role))
	if err != nil {
		t.Fatalf("a role without CREATE opening a current database: %v", err)
	}
	defer st.Close()
	if st.Role() != role || owner.Role() != pgtest.Superuser {
		t.Fatalf("roles %q and %q; want %q and %q", st.Role(), owner.Role(), role, pgtest.Superuser)
	}
}
