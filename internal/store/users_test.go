package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestUsersTokensAndLogins(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		must(t, st.CreateUser(ctx, "alice", false, "hash-a1"))
		must(t, st.CreateUser(ctx, "root_admin", true, "hash-r"))
		if err := st.CreateUser(ctx, "alice", true, "hash-x"); !errors.Is(err, ErrAlreadyExists) {
			t.Fatalf("a second alice: %v; want ErrAlreadyExists", err)
		}
		for _, bad := range []string{"Alice", "1st", "a-b", "a.b", "", strings.Repeat("a", 64), "a b"} {
			if err := st.CreateUser(ctx, bad, false, "hash-"+bad); err == nil || !strings.Contains(err.Error(), "lower-case letters") {
				t.Errorf("user name %q: %v; want a refusal naming the rule", bad, err)
			}
		}
		u, err := st.UserByTokenHash(ctx, "hash-a1")
		if err != nil || u.Name != "alice" || u.Admin {
			t.Fatalf("alice by token: %+v, %v", u, err)
		}
		if _, err := st.UserByTokenHash(ctx, "hash-nobody"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown token: %v", err)
		}
		// Rotation: the old hash is dead at once, the new one works, and the logins
		// made with the old one end.
		must(t, st.CreateLogin(ctx, "login-0", "alice", time.Now().Add(time.Hour)))
		if n, err := st.SetUserToken(ctx, "alice", "hash-a2"); err != nil || n != 1 {
			t.Fatalf("rotation: %d logins ended, %v; want 1", n, err)
		}
		if _, _, err := st.LoginUser(ctx, "login-0", time.Now(), time.Hour); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a login made with the rotated-out token: %v", err)
		}
		if _, err := st.UserByTokenHash(ctx, "hash-a1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the rotated-out token still works: %v", err)
		}
		if u, err := st.UserByTokenHash(ctx, "hash-a2"); err != nil || u.Name != "alice" {
			t.Fatalf("the new token: %+v, %v", u, err)
		}
		if _, err := st.SetUserToken(ctx, "ghost", "h"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("rotating a missing user's token: %v", err)
		}
		list, err := st.ListUsers(ctx)
		if err != nil || len(list) != 2 || list[0].Name != "alice" || !list[1].Admin {
			t.Fatalf("list: %+v, %v", list, err)
		}

		// Logins: found until they lapse; the expiry slides, written at most once a minute.
		now := time.Now()
		must(t, st.CreateLogin(ctx, "login-1", "alice", now.Add(time.Hour)))
		must(t, st.CreateLogin(ctx, "login-2", "alice", now.Add(time.Hour)))
		if err := st.CreateLogin(ctx, "login-x", "ghost", now.Add(time.Hour)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a login of a missing user: %v", err)
		}
		u, l, err := st.LoginUser(ctx, "login-1", now.Add(2*time.Minute), 12*time.Hour)
		if err != nil || u.Name != "alice" || !l.ExpiresAt.After(now.Add(11*time.Hour)) {
			t.Fatalf("login: %+v %+v %v; want alice with a slid expiry", u, l, err)
		}
		if _, _, err := st.LoginUser(ctx, "login-2", now.Add(2*time.Hour), 12*time.Hour); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a lapsed login: %v", err)
		}
		if n, err := st.PruneLogins(ctx, now.Add(2*time.Hour)); err != nil || n != 1 {
			t.Fatalf("prune: %d, %v; want the lapsed one", n, err)
		}
		must(t, st.DeleteLogin(ctx, "login-1"))
		if _, _, err := st.LoginUser(ctx, "login-1", now, time.Hour); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a logged-out login: %v", err)
		}
		// Removing a user ends its logins.
		must(t, st.CreateLogin(ctx, "login-3", "alice", now.Add(time.Hour)))
		must(t, st.DeleteUser(ctx, "alice"))
		if n, err := st.CountLogins(ctx, "alice"); err != nil || n != 0 {
			t.Fatalf("logins of a removed user: %d, %v", n, err)
		}
		if _, err := st.UserByTokenHash(ctx, "hash-a2"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a removed user's token: %v", err)
		}
		if err := st.DeleteUser(ctx, "alice"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("removing a missing user: %v", err)
		}
	})
}

func TestAuditLogIsOrderedAndPaged(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		for i, target := range []string{"alice", "bob", "s-1"} {
			seq, err := st.AppendAudit(ctx, AuditEntry{Actor: "root", Action: AuditUserAdd, Target: target, Detail: "d"})
			if err != nil || seq != int64(i+1) {
				t.Fatalf("append %d: seq %d, %v", i, seq, err)
			}
		}
		all, err := st.AuditLog(ctx, 0, 10)
		if err != nil || len(all) != 3 || all[0].Target != "s-1" || all[2].Target != "alice" || all[0].Actor != "root" || all[0].At.IsZero() {
			t.Fatalf("audit log: %+v, %v; want newest first", all, err)
		}
		page, err := st.AuditLog(ctx, all[0].Seq, 1)
		if err != nil || len(page) != 1 || page[0].Target != "bob" {
			t.Fatalf("the page before %d: %+v, %v", all[0].Seq, page, err)
		}
	})
}

// A session keeps its one-off environment; a run's cancel request reaches its
// heartbeat, and only a running run can be asked.
func TestSessionEnvironmentAndCancelRequest(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		must(t, st.CreateSession(ctx, Session{ID: "s-1", Agent: "a", Owner: "alice", Environment: "gpu"}))
		must(t, st.CreateSession(ctx, Session{ID: "s-2", Agent: "a", Owner: "alice"}))
		if s, err := st.GetSession(ctx, "s-1"); err != nil || s.Environment != "gpu" {
			t.Fatalf("session s-1: %+v, %v", s, err)
		}
		if s, err := st.GetSession(ctx, "s-2"); err != nil || s.Environment != "" {
			t.Fatalf("session s-2: %+v, %v", s, err)
		}
		if _, err := st.RunningRun(ctx, "s-1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("running run of an idle session: %v", err)
		}
		must(t, st.StartRun(ctx, Run{ID: "r-1", SessionID: "s-1", Owner: "host:1:1"}))
		if r, err := st.RunningRun(ctx, "s-1"); err != nil || r.ID != "r-1" {
			t.Fatalf("running run: %+v, %v", r, err)
		}
		if asked, err := st.HeartbeatRun(ctx, "r-1"); err != nil || asked {
			t.Fatalf("heartbeat before a cancel request: %v, %v", asked, err)
		}
		if ok, err := st.RequestCancel(ctx, "r-1"); err != nil || !ok {
			t.Fatalf("request cancel: %v, %v", ok, err)
		}
		if asked, err := st.HeartbeatRun(ctx, "r-1"); err != nil || !asked {
			t.Fatalf("heartbeat after a cancel request: %v, %v", asked, err)
		}
		if _, err := st.EndRun(ctx, "r-1", RunCancelled, "cancelled"); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.RequestCancel(ctx, "r-1"); err != nil || ok {
			t.Fatalf("request cancel of an ended run: %v, %v", ok, err)
		}
		if asked, err := st.HeartbeatRun(ctx, "r-1"); err != nil || asked {
			t.Fatalf("heartbeat of an ended run: %v, %v", asked, err)
		}
	})
}

// The harness group reads and writes users, logins and the audit log; a team role
// touches none of them.
func TestRLSUsersBelongToTheHarnessGroup(t *testing.T) {
	p := newRLSPlane(t)
	ctx := context.Background()
	h := p.asHarness
	must(t, h.CreateUser(ctx, "carol", true, "hash-c"))
	must(t, h.CreateLogin(ctx, "login-c", "carol", time.Now().Add(time.Hour)))
	if _, err := h.AppendAudit(ctx, AuditEntry{Actor: "ops", Action: AuditUserAdd, Target: "carol"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.LoginUser(ctx, "login-c", time.Now().Add(2*time.Minute), time.Hour); err != nil {
		t.Fatalf("the harness reading a login: %v", err)
	}
	if _, err := p.asAlice.ListUsers(ctx); !errors.Is(err, ErrForbidden) {
		t.Fatalf("a team role listing users: %v; want ErrForbidden", err)
	}
	if err := p.asAlice.CreateUser(ctx, "mallory", true, "hash-m"); !errors.Is(err, ErrForbidden) {
		t.Fatalf("a team role creating an admin: %v; want ErrForbidden", err)
	}
	if _, err := p.asAlice.AuditLog(ctx, 0, 10); !errors.Is(err, ErrForbidden) {
		t.Fatalf("a team role reading the audit log: %v; want ErrForbidden", err)
	}
	if _, err := p.asAlice.UserByTokenHash(ctx, "hash-c"); !errors.Is(err, ErrForbidden) {
		t.Fatalf("a team role looking up a token: %v; want ErrForbidden", err)
	}
}

// UserAndSession reads the token's user and a session in one statement: no user, no
// answer whatever the session; a missing session is not found; another owner's session
// is returned as it is (the caller checks the owner); a rotated token is dead at once.
func TestUserAndSession(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		must(t, st.CreateUser(ctx, "alice", true, "hash-a1"))
		must(t, st.CreateUser(ctx, "bob", false, "hash-b"))
		must(t, st.CreateSession(ctx, Session{ID: "s-a", Agent: "talker", Owner: "alice"}))
		u, ss, found, err := st.UserAndSession(ctx, "hash-a1", "s-a")
		want, _ := st.GetSession(ctx, "s-a")
		if err != nil || !found || u.Name != "alice" || !u.Admin || ss != want {
			t.Fatalf("alice and her session: %+v %+v %v %v; want %+v", u, ss, found, err, want)
		}
		if u2, err := st.UserByTokenHash(ctx, "hash-a1"); err != nil || u2 != u {
			t.Fatalf("the user %+v; UserByTokenHash %+v, %v", u, u2, err)
		}
		if u, ss, found, err := st.UserAndSession(ctx, "hash-b", "s-a"); err != nil || !found || u.Name != "bob" || ss.Owner != "alice" {
			t.Fatalf("bob and alice's session: %+v %+v %v %v", u, ss, found, err)
		}
		if u, _, found, err := st.UserAndSession(ctx, "hash-b", "nope"); err != nil || found || u.Name != "bob" {
			t.Fatalf("a missing session: %+v %v %v", u, found, err)
		}
		for _, id := range []string{"s-a", "nope"} {
			if _, _, found, err := st.UserAndSession(ctx, "hash-nobody", id); !errors.Is(err, ErrNotFound) || found {
				t.Fatalf("an unknown token, session %s: %v %v", id, found, err)
			}
		}
		if _, err := st.SetUserToken(ctx, "alice", "hash-a2"); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := st.UserAndSession(ctx, "hash-a1", "s-a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the rotated-out token: %v", err)
		}
	})
}
