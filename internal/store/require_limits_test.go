package store

import (
	"context"
	"database/sql"
	"testing"
)

// require_limits is stored as set (true or false) or unset (NULL), and survives updates.
func TestSandboxProviderRequireLimits(t *testing.T) {
	ctx := context.Background()
	yes, no := true, false
	eachDialect(t, func(t *testing.T, d dialect) {
		for _, want := range []*bool{nil, &yes, &no} {
			st := openAt(t, freshURL(t, d))
			must(t, st.CreateSandboxProvider(ctx, SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: "alice", RequireLimits: want}))
			p, err := st.GetSandboxProvider(ctx, "local")
			if err != nil {
				t.Fatal(err)
			}
			if !sameBool(p.RequireLimits, want) {
				t.Fatalf("stored %v, read back %v", show(want), show(p.RequireLimits))
			}
			p.RequireLimits = &yes
			must(t, st.UpdateSandboxProvider(ctx, p))
			if p, _ = st.OnlySandboxProvider(ctx); !sameBool(p.RequireLimits, &yes) {
				t.Fatalf("after update: %v, want true", show(p.RequireLimits))
			}
			p.RequireLimits = nil
			must(t, st.UpdateSandboxProvider(ctx, p))
			if p, _ = st.OnlySandboxProvider(ctx); p.RequireLimits != nil {
				t.Fatalf("after unsetting: %v, want unset", show(p.RequireLimits))
			}
		}
	})
}

// A provider saved before migration 5 reads back with require_limits unset.
func TestRequireLimitsMigration(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		st := upgraded(t, d, 4, `INSERT INTO owners VALUES ('alice', 0); INSERT INTO sandbox_providers(name, type, status, owner, created_at, updated_at) VALUES ('local', 'local', 'Ready', 'alice', 0, 0)`)
		p, err := st.GetSandboxProvider(context.Background(), "local")
		if err != nil || p.RequireLimits != nil {
			t.Fatalf("old provider after the migration: %+v, %v; want require_limits unset", p, err)
		}
	})
}

// upgraded creates a database of dialect d as an older release left it (only the first
// n migrations applied), runs seed in it, and opens it with this release, which applies
// the rest.
func upgraded(t *testing.T, d dialect, n int, seed string) *Store {
	t.Helper()
	url := freshURL(t, d)
	driver := "sqlite"
	if d == postgres {
		driver = "pgx"
	}
	raw, err := sql.Open(driver, url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	old := &db{sql: raw, dialect: d}
	ctx := context.Background()
	if _, err := old.ExecContext(ctx, `CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for i, m := range migrations[:n] {
		if text := m.text(d); text != onlyPostgres {
			if _, err := old.ExecContext(ctx, text); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := old.ExecContext(ctx, `INSERT INTO schema_migrations VALUES (?, 0)`, i+1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := old.ExecContext(ctx, seed); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	return openAt(t, url)
}

// openAt opens the database at path (or URL), closed at the end of the test.
func openAt(t *testing.T, path string) *Store {
	t.Helper()
	st, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func sameBool(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(b *bool) any {
	if b == nil {
		return "unset"
	}
	return *b
}
