package storetest

import (
	"context"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// HarnessDB is a fresh PostgreSQL control-plane database on pgtest's cluster with one
// harness role set up on it: what a test starts with when the harness must connect as
// a member of trueforge_harness rather than as the tables' owner.
type HarnessDB struct {
	Cluster *pgtest.Cluster
	Name    string       // the database's name
	Owner   *store.Store // the tables' owner's handle, closed when the test ends
	Harness string       // a role applied as store.HarnessRole
}

// NewHarnessDB creates the database and its harness role, skipping tb as pgtest.Get
// does when there is no PostgreSQL.
func NewHarnessDB(tb testing.TB) *HarnessDB {
	tb.Helper()
	c := pgtest.Get(tb)
	role := c.Role(tb, "harness") // before the database, so it is dropped after it
	admin := c.Database(tb)
	owner := Open(tb, admin)
	if err := owner.ApplyRoles(context.Background(), store.HarnessRole, role); err != nil {
		tb.Fatal(err)
	}
	return &HarnessDB{Cluster: c, Name: pgtest.Name(admin), Owner: owner, Harness: role}
}

// URL connects to the database as role.
func (d *HarnessDB) URL(role string) string { return d.Cluster.URL(d.Name, role) }
