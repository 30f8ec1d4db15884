package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// harnessRoleDB creates a PostgreSQL database, seeded as its owner (seedNoSandbox, then
// seed), and returns the owner's handle and the URL that connects as a harness role (a
// member of trueforge_harness, not the tables' owner).
func harnessRoleDB(t *testing.T, seed func(owner *store.Store)) (*store.Store, string) {
	t.Helper()
	db := storetest.NewHarnessDB(t)
	harnesstest.SeedNoSandbox(t, db.Owner)
	seed(db.Owner)
	return db.Owner, db.URL(db.Harness)
}

// On a PostgreSQL control plane, as a harness role (a member of trueforge_harness, not
// the tables' owner): users, logins, sessions and runs live in the shared database, a
// rotated token is dead at once for every replica, and another user's session is 404.
func TestOnPostgreSQL(t *testing.T) {
	ctx := context.Background()
	owner, harnessURL := harnessRoleDB(t, func(owner *store.Store) {
		harnesstest.AddAgent(t, owner, "talker", "", harnesstest.AgentSpec{"model": script(text("Hello from PostgreSQL."))})
	})
	asHarness := storetest.Open(t, harnessURL)

	f := newFixture(t, fixtureOpts{st: asHarness})
	sid := f.newSession("alice", "talker")
	evs, stop := f.stream("alice", sid, "")
	defer stop()
	f.send("alice", sid, "hi")
	seen := committed(until(t, evs, 10*time.Second, runFinished))
	if len(seen) != 4 || !strings.Contains(seen[1].data, "Hello from PostgreSQL.") {
		t.Fatalf("stream: %v", kindsOf(seen))
	}
	want(t, "bob reads alice's session", f.req("GET", "/api/v1/sessions/"+sid, "bob", nil), http.StatusNotFound, api.CodeNotFound)
	want(t, "bob deletes alice's session", f.req("DELETE", "/api/v1/sessions/"+sid, "bob", nil), http.StatusNotFound, api.CodeNotFound)

	// A second replica on the same database knows the same users and logins.
	other := storetest.Open(t, harnessURL)
	g := newFixture(t, fixtureOpts{st: other, noUsers: true})
	g.tokens = f.tokens
	login := f.req("POST", "/api/v1/login", "", map[string]any{"token": f.tokens["alice"]})
	want(t, "login on replica A", login, http.StatusOK, "")
	r, _ := http.NewRequest("GET", g.ts.URL+"/api/v1/sessions/"+sid, nil)
	r.AddCookie(login.Cookies()[0])
	want(t, "the login cookie on replica B", g.do(r), http.StatusOK, "")
	_, hash, _ := api.NewToken()
	if _, err := owner.SetUserToken(ctx, "alice", hash); err != nil {
		t.Fatal(err)
	}
	want(t, "the rotated-out token on replica B", g.req("GET", "/api/v1/me", "alice", nil), http.StatusUnauthorized, api.CodeUnauthorized)
	// A session's routes read the token's user and the session in one statement: still
	// afresh for each request, and still the owner's only.
	want(t, "the rotated-out token on alice's session on replica B", g.req("GET", "/api/v1/sessions/"+sid, "alice", nil), http.StatusUnauthorized, api.CodeUnauthorized)
	want(t, "the rotated-out token posting on replica B", g.req("POST", "/api/v1/sessions/"+sid+"/messages", "alice", map[string]any{"text": "hi"}), http.StatusUnauthorized, api.CodeUnauthorized)
	want(t, "bob reads alice's session on replica B", g.req("GET", "/api/v1/sessions/"+sid, "bob", nil), http.StatusNotFound, api.CodeNotFound)
	want(t, "bob posts to alice's session on replica B", g.req("POST", "/api/v1/sessions/"+sid+"/messages", "bob", map[string]any{"text": "hi"}), http.StatusNotFound, api.CodeNotFound)
	r, _ = http.NewRequest("GET", g.ts.URL+"/api/v1/me", nil)
	r.AddCookie(login.Cookies()[0])
	want(t, "the rotated-out token's login on replica B", g.do(r), http.StatusUnauthorized, api.CodeUnauthorized)
	want(t, "bob deletes alice's session on replica B", g.req("DELETE", "/api/v1/sessions/"+sid, "bob", nil), http.StatusNotFound, api.CodeNotFound)
	if _, err := asHarness.GetSession(ctx, sid); err != nil {
		t.Fatalf("alice's session after bob's delete: %v", err)
	}
}
