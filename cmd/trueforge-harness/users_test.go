package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// users add prints a token once (and stores only its hash); users token rotates it, the
// old one dead at once; users list shows who is admin; users remove ends the user's
// logins; every change is in the audit log with the caller as actor.
func TestUsersCommands(t *testing.T) {
	st := harnesstest.NewStore(t)
	ctx := context.Background()
	out, errOut, err := run(t, st.Path(), "", "users", "add", "alice")
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(out)
	if !strings.HasPrefix(token, api.TokenPrefix) || strings.Count(out, "\n") != 1 || !strings.Contains(errOut, "shown only now") {
		t.Fatalf("users add: stdout %q stderr %q", out, errOut)
	}
	u, err := st.UserByTokenHash(ctx, api.HashToken(token))
	if err != nil || u.Name != "alice" || u.Admin {
		t.Fatalf("alice by her token: %+v %v", u, err)
	}
	var n int
	if err := st.QueryRow(ctx, `SELECT COUNT(*) FROM users WHERE token_hash = ?`, token).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the token itself is stored: %d %v", n, err)
	}
	if _, _, err := run(t, st.Path(), "", "users", "add", "root", "--admin"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, st.Path(), "", "users", "add", "alice"); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Fatalf("adding alice twice: %v", err)
	}
	if _, _, err := run(t, st.Path(), "", "users", "add", "Bad.Name"); err == nil || !strings.Contains(err.Error(), "lower-case letters, digits and _") {
		t.Fatalf("a bad name: %v", err)
	}

	out, _, err = run(t, st.Path(), "", "users", "token", "alice")
	if err != nil {
		t.Fatal(err)
	}
	fresh := strings.TrimSpace(out)
	if _, err := st.UserByTokenHash(ctx, api.HashToken(token)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the old token after rotation: %v", err)
	}
	if u, err := st.UserByTokenHash(ctx, api.HashToken(fresh)); err != nil || u.Name != "alice" {
		t.Fatalf("the new token: %+v %v", u, err)
	}
	if _, _, err := run(t, st.Path(), "", "users", "token", "ghost"); err == nil || !strings.Contains(err.Error(), `no user "ghost"`) {
		t.Fatalf("rotating a missing user: %v", err)
	}

	out, _, err = run(t, st.Path(), "", "users", "list")
	if err != nil || !strings.Contains(out, "NAME") || !strings.Contains(out, "alice") || !strings.Contains(out, "yes") {
		t.Fatalf("users list: %v\n%s", err, out)
	}
	out, _, err = run(t, st.Path(), "", "users", "list", "-o", "json")
	var list []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 || list[1]["name"] != "root" || list[1]["admin"] != true || list[0]["created_at"] == nil {
		t.Fatalf("users list -o json: %v\n%s", err, out)
	}
	if _, _, err := run(t, st.Path(), "", "users", "list", "-o", "yaml"); err == nil {
		t.Fatal("users list -o yaml was accepted")
	}

	must(t, st.CreateLogin(ctx, "login-hash", "alice", time.Now().Add(time.Hour)))
	out, _, err = run(t, st.Path(), "", "users", "remove", "alice")
	if err != nil || !strings.Contains(out, "its 1 web logins ended") {
		t.Fatalf("users remove: %v\n%s", err, out)
	}
	if n, _ := st.CountLogins(ctx, "alice"); n != 0 {
		t.Fatalf("%d logins of a removed user", n)
	}
	if _, err := st.UserByTokenHash(ctx, api.HashToken(fresh)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a removed user's token: %v", err)
	}
	if _, _, err := run(t, st.Path(), "", "users", "remove", "alice"); err == nil {
		t.Fatal("removing alice twice worked")
	}

	entries, err := st.AuditLog(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if e.Actor != harnesstest.Owner {
			t.Errorf("audit entry %+v: actor %q; want the CLI's caller %q", e, e.Actor, harnesstest.Owner)
		}
		got = append(got, e.Action+" "+e.Target)
	}
	if strings.Join(got, ", ") != "user.remove alice, user.token alice, user.add root, user.add alice" {
		t.Fatalf("audit log: %v", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
