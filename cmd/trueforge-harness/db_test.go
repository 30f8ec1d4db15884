package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// cli executes the CLI in-process with exactly args (no --database-url or --owner added).
func cli(args ...string) (string, error) {
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(""))
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// roleExists reports whether the cluster has role name.
func roleExists(t *testing.T, st *store.Store, name string) bool {
	t.Helper()
	var n int
	if err := st.QueryRow(context.Background(), `SELECT COUNT(*) FROM pg_roles WHERE rolname = ?`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// The setup of a PostgreSQL control plane as docs/guides/postgres.md gives it: an owner
// role with CREATEROLE (not a superuser) owns the database; db migrate, as that owner,
// brings it to the latest schema; db roles prints the SQL of a team and a harness role
// without running it, and --apply runs it; the roles then do what their kind may, and
// no more.
func TestDBMigrateAndRoles(t *testing.T) {
	c := pgtest.Get(t)
	cpOwner := c.Role(t, "cp_owner") // before the database: dropped after it
	db := pgtest.Name(c.Database(t))
	c.Exec(t, db, `ALTER ROLE `+cpOwner+` CREATEROLE; ALTER DATABASE `+db+` OWNER TO `+cpOwner)
	admin := c.URL(db, cpOwner)
	out, err := cli("db", "migrate", "--database-url", admin)
	want := fmt.Sprintf("(PostgreSQL, as role %s) is at schema version %d", cpOwner, store.LatestSchemaVersion())
	if err != nil || !strings.Contains(out, want) {
		t.Fatalf("db migrate: %v\n%s\nwant %q", err, out, want)
	}

	owner, err := store.Open(context.Background(), admin)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	team, harness := uniqueRole(t, c, "team"), uniqueRole(t, c, "harness")

	out, err = cli("db", "roles", "--team", team, "--database-url", admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CREATE ROLE " + team + " LOGIN", "GRANT trueforge_team TO " + team, `"public".environments`} {
		if !strings.Contains(out, want) {
			t.Errorf("db roles --team prints no %q:\n%s", want, out)
		}
	}
	if roleExists(t, owner, team) {
		t.Fatal("db roles without --apply created the role")
	}

	for _, args := range [][]string{{"--team", team}, {"--harness", harness}} {
		out, err := cli(append([]string{"db", "roles", "--apply", "--database-url", admin}, args...)...)
		if err != nil || !strings.Contains(out, "is set up") {
			t.Fatalf("db roles %v --apply: %v\n%s", args, err, out)
		}
	}
	asTeam, err := store.Open(context.Background(), c.URL(pgtest.Name(admin), team))
	if err != nil {
		t.Fatalf("the team role connecting: %v", err)
	}
	defer asTeam.Close()
	if _, err := asTeam.ListEnvironments(context.Background()); err != nil {
		t.Errorf("the team role reading environments: %v", err)
	}
	// A team reads sessions, its own agents' only (it has none), but not what they hold.
	if ss, err := asTeam.ListSessions(context.Background(), "", ""); err != nil || len(ss) != 0 {
		t.Errorf("the team role reading sessions: %v, %v; want none", ss, err)
	}
	if _, err := asTeam.Events(context.Background(), "s1", 0); !errors.Is(err, store.ErrForbidden) {
		t.Errorf("the team role reading a session's events: %v; want ErrForbidden", err)
	}
	out, err = cli("db", "migrate", "--database-url", c.URL(pgtest.Name(admin), harness))
	if err != nil || !strings.Contains(out, "as role "+harness) {
		t.Errorf("db migrate as the harness role on a current schema: %v\n%s", err, out)
	}
}

// uniqueRole is a role name no other test uses, which does not exist yet (db roles
// creates it); it is dropped when t ends.
func uniqueRole(t *testing.T, c *pgtest.Cluster, prefix string) string {
	t.Helper()
	name := c.Role(t, prefix) // reserves the name and drops the role when t ends
	c.DropRole(t, name)
	return name
}

// db roles refuses what it cannot do, saying what to pass instead.
func TestDBRolesErrors(t *testing.T) {
	sqlite := filepath.Join(t.TempDir(), "cp.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"db", "roles", "--database-url", sqlite}, "--team NAME for a team"},
		{[]string{"db", "roles", "--team", "a", "--harness", "b", "--database-url", sqlite}, "either --team or --harness, not both"},
		{[]string{"db", "roles", "--team", "alice", "--database-url", sqlite}, "roles exist only on PostgreSQL"},
	} {
		if _, err := cli(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want %q", tc.args, err, tc.want)
		}
	}
	c := pgtest.Get(t)
	admin := c.Database(t)
	if _, err := cli("db", "roles", "--team", "Bad-Name", "--database-url", admin); err == nil || !strings.Contains(err.Error(), "lower-case letters, digits and _") {
		t.Errorf("a role name that needs quoting: %v", err)
	}
	if _, err := cli("db", "roles", "--team", "trueforge_team", "--database-url", admin); err == nil || !strings.Contains(err.Error(), "group roles") {
		t.Errorf("a group role's name: %v", err)
	}
	// A team role cannot create roles.
	team := c.Role(t, "team")
	if _, err := cli("db", "roles", "--team", team, "--apply", "--database-url", admin); err != nil {
		t.Fatal(err)
	}
	_, err := cli("db", "roles", "--harness", "someone_else", "--apply", "--database-url", c.URL(pgtest.Name(admin), team))
	if err == nil || !strings.Contains(err.Error(), "run it as the database's owner") {
		t.Errorf("a team role applying roles: %v", err)
	}
}

// On PostgreSQL the harness's caller is the role it connects as: sessions are that
// role's, another harness role cannot touch them, and --owner naming anyone else is
// refused, naming both.
func TestCLIOwnerIsTheRoleOnPostgres(t *testing.T) {
	pg := storetest.NewHarnessDB(t)
	owner, h1, h2 := pg.Owner, pg.Harness, pg.Cluster.Role(t, "harness")
	harnesstest.AddAgent(t, owner, "talker", "", harnesstest.AgentSpec{"model": harnesstest.Script(map[string]any{"text": "Hello there."})})
	if err := owner.ApplyRoles(context.Background(), store.HarnessRole, h2); err != nil {
		t.Fatal(err)
	}
	url1, url2 := pg.URL(h1), pg.URL(h2)

	_, err := cli("--database-url", url1, "--owner", "mallory", "run", "talker", "hi")
	if err == nil || !strings.Contains(err.Error(), `--owner (or TRUEFORGE_OWNER) is "mallory"`) || !strings.Contains(err.Error(), fmt.Sprintf("connects as: %q", h1)) {
		t.Fatalf("--owner naming another: %v", err)
	}
	if out, err := cli("--database-url", url1, "--owner", h1, "run", "talker", "hi"); err != nil || !strings.Contains(out, "Hello there.") {
		t.Fatalf("--owner naming the role itself: %v\n%s", err, out)
	}
	ss, err := owner.ListSessions(context.Background(), "", "talker")
	if err != nil || len(ss) != 1 || ss[0].Owner != h1 {
		t.Fatalf("sessions after the run: %+v, %v; want one of %s", ss, err, h1)
	}
	if out, err := cli("--database-url", url1, "sessions", "list"); err != nil || !strings.Contains(out, ss[0].ID) {
		t.Fatalf("%s listing its sessions: %v\n%s", h1, err, out)
	}
	if out, err := cli("--database-url", url2, "sessions", "list"); err != nil || strings.Contains(out, ss[0].ID) {
		t.Fatalf("%s listing sessions shows %s's: %v\n%s", h2, h1, err, out)
	}
	_, err = cli("--database-url", url2, "sessions", "show", ss[0].ID)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("belongs to %q, not to you (%q)", h1, h2)) || !strings.Contains(err.Error(), "connect as its role") {
		t.Fatalf("%s showing %s's session: %v", h2, h1, err)
	}
}
