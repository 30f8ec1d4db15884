package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Every route the router serves is in the OpenAPI document, and every operation the
// document describes is a route.
func TestRoutesAndOpenAPIAgree(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	r := f.req("GET", "/api/v1/openapi.json", "", nil)
	want(t, "openapi.json", r, http.StatusOK, "")
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi.json: %v, version %q", err, doc.OpenAPI)
	}
	if !bytes.Equal(r.body, api.OpenAPI()) {
		t.Fatal("the served document is not the embedded one")
	}
	var routes, documented []string
	for _, rt := range f.srv.Routes() {
		routes = append(routes, rt.Method+" "+api.OpenAPIPath(rt.Path))
	}
	for p, ops := range doc.Paths {
		for m := range ops {
			switch m {
			case "get", "post", "put", "patch", "delete", "head", "options":
				documented = append(documented, strings.ToUpper(m)+" "+p)
			}
		}
	}
	sort.Strings(routes)
	sort.Strings(documented)
	for _, rt := range routes {
		if !slices.Contains(documented, rt) {
			t.Errorf("route %s is not in openapi.json", rt)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routes, d) {
			t.Errorf("openapi.json documents %s, which the router does not serve", d)
		}
	}
	if len(routes) < 18 {
		t.Errorf("only %d routes: %v", len(routes), routes)
	}
}

func TestHealthzAndWebPage(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	want(t, "healthz", f.req("GET", "/healthz", "", nil), http.StatusOK, "")
	page := f.req("GET", "/", "", nil)
	if page.StatusCode != http.StatusOK || !strings.Contains(string(page.body), "/api/v1/openapi.json") {
		t.Fatalf("the placeholder page: %d %s", page.StatusCode, page.body)
	}
	f.st.Close()
	want(t, "healthz with the store closed", f.req("GET", "/healthz", "", nil), http.StatusServiceUnavailable, api.CodeUnavailable)
}

// Tokens: none or a bad one is 401; a rotated token is dead at once; a removed user's
// token too.
func TestBearerTokens(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	r := f.req("GET", "/api/v1/me", "", nil)
	want(t, "no token", r, http.StatusUnauthorized, api.CodeUnauthorized)
	if r.Header.Get("WWW-Authenticate") == "" {
		t.Error("a 401 without WWW-Authenticate")
	}
	f.tokens["mallory"] = "tfu_" + strings.Repeat("A", 43)
	want(t, "a made-up token", f.req("GET", "/api/v1/me", "mallory", nil), http.StatusUnauthorized, api.CodeUnauthorized)
	req, _ := http.NewRequest("GET", f.ts.URL+"/api/v1/me", nil)
	req.Header.Set("Authorization", "Basic YWxpY2U6eA==")
	want(t, "basic auth", f.do(req), http.StatusUnauthorized, api.CodeUnauthorized)

	me := f.req("GET", "/api/v1/me", "alice", nil)
	want(t, "me", me, http.StatusOK, "")
	if m := me.json(t); m["name"] != "alice" || m["admin"] != false || m["auth"] != "bearer" || m["csrf_token"] != nil {
		t.Fatalf("me: %v", m)
	}
	if m := f.req("GET", "/api/v1/me", "root", nil).json(t); m["admin"] != true {
		t.Fatalf("root is not an admin: %v", m)
	}

	old := f.tokens["alice"]
	token, hash, _ := api.NewToken()
	if _, err := f.st.SetUserToken(context.Background(), "alice", hash); err != nil {
		t.Fatal(err)
	}
	want(t, "the rotated-out token", f.req("GET", "/api/v1/me", "alice", nil), http.StatusUnauthorized, api.CodeUnauthorized)
	f.tokens["alice"] = token
	want(t, "the new token", f.req("GET", "/api/v1/me", "alice", nil), http.StatusOK, "")
	if old == token || !strings.HasPrefix(token, api.TokenPrefix) || len(token) != len(api.TokenPrefix)+43 {
		t.Fatalf("token %q (old %q)", token, old)
	}
	must(t, f.st.DeleteUser(context.Background(), "alice"))
	want(t, "a removed user's token", f.req("GET", "/api/v1/me", "alice", nil), http.StatusUnauthorized, api.CodeUnauthorized)
}

// The web page's login: a cookie (HttpOnly, SameSite=Strict; Secure when asked), a CSRF
// token that state-changing requests on the cookie must carry, an Origin that must be
// this host, and a logout or a removed user that ends it.
func TestCookieLoginAndCSRF(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	harnesstest.AddAgent(t, f.st, "talker", "", harnesstest.AgentSpec{"model": script(text("Hi."))})
	want(t, "login with a bad token", f.req("POST", "/api/v1/login", "", map[string]any{"token": "tfu_nope"}), http.StatusUnauthorized, api.CodeUnauthorized)
	want(t, "login without a token", f.req("POST", "/api/v1/login", "", map[string]any{}), http.StatusBadRequest, api.CodeBadJSON)
	login := f.req("POST", "/api/v1/login", "", map[string]any{"token": f.tokens["alice"]})
	want(t, "login", login, http.StatusOK, "")
	var ck *http.Cookie
	for _, c := range login.Cookies() {
		if c.Name == api.CookieName {
			ck = c
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || ck.Path != "/" || len(ck.Value) < 40 {
		t.Fatalf("login cookie: %+v", ck)
	}
	csrf, _ := login.json(t)["csrf_token"].(string)
	if csrf == "" || login.json(t)["auth"] != "cookie" {
		t.Fatalf("login answer: %s", login.body)
	}
	// The cookie value is never what the store keeps.
	var n int
	must(t, f.st.QueryRow(context.Background(), `SELECT COUNT(*) FROM user_logins WHERE id_hash = ?`, ck.Value).Scan(&n))
	if n != 0 {
		t.Fatal("the store keeps the cookie's value itself")
	}

	cookieReq := func(method, path string, body any, hdr map[string]string) response {
		var b []byte
		if body != nil {
			b, _ = json.Marshal(body)
		}
		r, _ := http.NewRequest(method, f.ts.URL+path, bytes.NewReader(b))
		if body != nil {
			r.Header.Set("Content-Type", "application/json")
		}
		r.AddCookie(&http.Cookie{Name: api.CookieName, Value: ck.Value})
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		return f.do(r)
	}
	me := cookieReq("GET", "/api/v1/me", nil, nil)
	want(t, "me by cookie", me, http.StatusOK, "")
	if me.json(t)["csrf_token"] != csrf || me.json(t)["name"] != "alice" {
		t.Fatalf("me by cookie: %s", me.body)
	}
	body := map[string]any{"agent": "talker"}
	want(t, "a cookie POST without the CSRF header", cookieReq("POST", "/api/v1/sessions", body, nil), http.StatusForbidden, api.CodeCSRF)
	want(t, "a cookie POST with a wrong CSRF header", cookieReq("POST", "/api/v1/sessions", body, map[string]string{api.CSRFHeader: "x" + csrf}), http.StatusForbidden, api.CodeCSRF)
	want(t, "a cookie POST from another origin", cookieReq("POST", "/api/v1/sessions", body, map[string]string{api.CSRFHeader: csrf, "Origin": "https://evil.example"}),
		http.StatusForbidden, api.CodeBadOrigin)
	want(t, "a cookie POST marked cross-site", cookieReq("POST", "/api/v1/sessions", body, map[string]string{api.CSRFHeader: csrf, "Sec-Fetch-Site": "cross-site"}),
		http.StatusForbidden, api.CodeBadOrigin)
	created := cookieReq("POST", "/api/v1/sessions", body, map[string]string{api.CSRFHeader: csrf, "Origin": f.ts.URL})
	want(t, "a cookie POST with CSRF and this origin", created, http.StatusCreated, "")
	sid := created.json(t)["id"].(string)
	want(t, "a cookie DELETE without CSRF", cookieReq("DELETE", "/api/v1/sessions/"+sid, nil, nil), http.StatusForbidden, api.CodeCSRF)
	// A bearer request needs neither.
	want(t, "a bearer POST", f.req("POST", "/api/v1/sessions", "alice", body), http.StatusCreated, "")
	if ss, _ := f.st.ListSessions(context.Background(), "alice", ""); len(ss) != 2 {
		t.Fatalf("%d sessions of alice; want 2 (the refused requests created none)", len(ss))
	}

	want(t, "logout without CSRF", cookieReq("POST", "/api/v1/logout", nil, nil), http.StatusForbidden, api.CodeCSRF)
	out := cookieReq("POST", "/api/v1/logout", nil, map[string]string{api.CSRFHeader: csrf})
	want(t, "logout", out, http.StatusNoContent, "")
	if c := out.Cookies(); len(c) != 1 || c[0].MaxAge >= 0 {
		t.Fatalf("logout cookies: %+v", c)
	}
	want(t, "the logged-out cookie", cookieReq("GET", "/api/v1/me", nil, nil), http.StatusUnauthorized, api.CodeUnauthorized)

	// Removing a user ends its logins; a lapsed login is refused.
	login = f.req("POST", "/api/v1/login", "", map[string]any{"token": f.tokens["bob"]})
	bobCookie := login.Cookies()[0].Value
	asBob := func() response {
		r, _ := http.NewRequest("GET", f.ts.URL+"/api/v1/me", nil)
		r.AddCookie(&http.Cookie{Name: api.CookieName, Value: bobCookie})
		return f.do(r)
	}
	want(t, "bob's cookie", asBob(), http.StatusOK, "")
	f.clock.Advance(13 * time.Hour)
	want(t, "a login idle for 13 hours", asBob(), http.StatusUnauthorized, api.CodeUnauthorized)
	f.clock.Advance(-13 * time.Hour)
	login = f.req("POST", "/api/v1/login", "", map[string]any{"token": f.tokens["bob"]})
	bobCookie = login.Cookies()[0].Value
	want(t, "bob's new cookie", asBob(), http.StatusOK, "")
	// Rotating the token ends the logins made with the old one (it may have leaked).
	token, hash, _ := api.NewToken()
	if n, err := f.st.SetUserToken(context.Background(), "bob", hash); err != nil || n < 1 {
		t.Fatalf("rotation: %d, %v", n, err)
	}
	want(t, "a cookie of bob's rotated-out token", asBob(), http.StatusUnauthorized, api.CodeUnauthorized)
	f.tokens["bob"] = token
	login = f.req("POST", "/api/v1/login", "", map[string]any{"token": f.tokens["bob"]})
	bobCookie = login.Cookies()[0].Value
	want(t, "bob's cookie of the new token", asBob(), http.StatusOK, "")
	must(t, f.st.DeleteUser(context.Background(), "bob"))
	want(t, "a removed user's cookie", asBob(), http.StatusUnauthorized, api.CodeUnauthorized)
}

// The cookie is Secure over TLS, and behind a TLS proxy (SecureCookies).
func TestSecureCookieBehindAProxy(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: func(c *api.Config) { c.SecureCookies = true }})
	login := f.req("POST", "/api/v1/login", "", map[string]any{"token": f.tokens["alice"]})
	if c := login.Cookies(); len(c) != 1 || !c[0].Secure {
		t.Fatalf("cookie %+v; want Secure", c)
	}
}

// Errors are JSON with the fitting status, naming what is wrong.
func TestErrorsNameTheProblem(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	harnesstest.AddAgent(t, f.st, "talker", "", harnesstest.AgentSpec{"model": script(text("Hi."))})
	harnesstest.AddAgent(t, f.st, "boxed", "default", harnesstest.AgentSpec{"model": script(), "sandbox": harnesstest.Sandbox("default", 5, 10, 20)})
	for _, tc := range []struct {
		name   string
		body   any
		status int
		code   string
		says   string
	}{
		{"bad JSON", []byte(`{"agent": `), 400, api.CodeBadJSON, "ends in the middle"},
		{"syntax", []byte(`{"agent" "x"}`), 400, api.CodeBadJSON, "not valid JSON at byte"},
		{"unknown field", map[string]any{"agent": "talker", "agnet": 1}, 400, api.CodeBadJSON, `"agnet"`},
		{"wrong type", map[string]any{"agent": 5}, 400, api.CodeBadJSON, `field "agent" must be string`},
		{"missing field", map[string]any{}, 400, api.CodeBadJSON, `field "agent" is required`},
		{"two values", []byte(`{"agent": "talker"} {}`), 400, api.CodeBadJSON, "more after it"},
		{"not an object", []byte(`[1]`), 400, api.CodeBadJSON, "JSON object"},
		{"too large", []byte(`{"agent": "` + strings.Repeat("a", 2<<20) + `"}`), 413, api.CodeTooLarge, "over 1048576 bytes"},
		{"unknown agent", map[string]any{"agent": "ghost"}, 422, api.CodeUnknownAgent, `agent "ghost" is not published`},
		{"agent not ready", map[string]any{"agent": "boxed"}, 422, api.CodeAgentNotReady, "is Building, not Ready"},
		{"environment for an agent without a sandbox", map[string]any{"agent": "talker", "environment": "default"}, 422, api.CodeBadEnvironment, "has no sandbox"},
	} {
		r := f.req("POST", "/api/v1/sessions", "alice", tc.body)
		want(t, tc.name, r, tc.status, tc.code)
		if !strings.Contains(r.errMessage(), tc.says) || r.Header.Get("Content-Type") != "application/json; charset=utf-8" {
			t.Errorf("%s: %s; want it to say %q", tc.name, r.body, tc.says)
		}
	}
	req, _ := http.NewRequest("POST", f.ts.URL+"/api/v1/sessions", strings.NewReader(`agent=talker`))
	req.Header.Set("Authorization", "Bearer "+f.tokens["alice"])
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	want(t, "a form body", f.do(req), http.StatusUnsupportedMediaType, api.CodeUnsupportedMedia)
	req, _ = http.NewRequest("POST", f.ts.URL+"/api/v1/sessions", strings.NewReader(`{"agent": "talker"}`))
	req.Header.Set("Authorization", "Bearer "+f.tokens["alice"])
	want(t, "no Content-Type", f.do(req), http.StatusUnsupportedMediaType, api.CodeUnsupportedMedia)

	r := f.req("PUT", "/api/v1/sessions", "alice", map[string]any{})
	want(t, "PUT on sessions", r, http.StatusMethodNotAllowed, api.CodeMethod)
	if r.Header.Get("Allow") != "POST, GET, HEAD" {
		t.Errorf("Allow: %q", r.Header.Get("Allow"))
	}
	want(t, "PATCH on a session", f.req("PATCH", "/api/v1/sessions/s-1", "alice", map[string]any{}), http.StatusMethodNotAllowed, api.CodeMethod)
	want(t, "an unknown API route", f.req("GET", "/api/v1/nothing", "alice", nil), http.StatusNotFound, api.CodeNotFound)
	want(t, "a bad Last-Event-ID", f.req("GET", "/api/v1/sessions/"+f.newSession("alice", "talker")+"/events?after=x", "alice", nil), http.StatusBadRequest, api.CodeBadRequest)
	want(t, "a message without text", f.req("POST", "/api/v1/sessions/"+f.newSession("alice", "talker")+"/messages", "alice", map[string]any{"text": " "}),
		http.StatusBadRequest, api.CodeBadJSON)
	want(t, "a non-admin's audit log", f.req("GET", "/api/v1/admin/audit", "alice", nil), http.StatusForbidden, api.CodeAdminOnly)
	want(t, "a bad audit limit", f.req("GET", "/api/v1/admin/audit?limit=0", "root", nil), http.StatusBadRequest, api.CodeBadRequest)
}

// Agents (all published, with readiness) and environments (Ready ones only).
func TestAgentsAndEnvironments(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	harnesstest.AddAgent(t, f.st, "talker", "", harnesstest.AgentSpec{"model": script(text("Hi.")), "description": "Answers."})
	harnesstest.AddAgent(t, f.st, "boxed", "default", harnesstest.AgentSpec{"model": script(), "sandbox": harnesstest.Sandbox("default", 5, 10, 20), "code_mode": true})
	harnesstest.AddEnvironment(t, f.st, "gpu", "Ready")
	harnesstest.AddEnvironment(t, f.st, "broken", "Failed")
	r := f.req("GET", "/api/v1/agents", "alice", nil)
	want(t, "agents", r, http.StatusOK, "")
	var ag struct{ Agents []map[string]any }
	_ = json.Unmarshal(r.body, &ag)
	if len(ag.Agents) != 2 || ag.Agents[0]["name"] != "boxed" || ag.Agents[1]["name"] != "talker" {
		t.Fatalf("agents: %s", r.body)
	}
	boxed, talker := ag.Agents[0], ag.Agents[1]
	if boxed["sandbox_enabled"] != true || boxed["environment"] != "default" || boxed["ready"] != false || !strings.Contains(boxed["not_ready"].(string), "Building") ||
		boxed["code_mode"] != true || boxed["file_downloads"] != true || boxed["replay"] != true {
		t.Errorf("boxed: %v", boxed)
	}
	if talker["sandbox_enabled"] != false || talker["environment"] != nil || talker["ready"] != true || talker["description"] != "Answers." {
		t.Errorf("talker: %v", talker)
	}
	r = f.req("GET", "/api/v1/environments", "alice", nil)
	var envs struct{ Environments []map[string]any }
	_ = json.Unmarshal(r.body, &envs)
	if len(envs.Environments) != 1 || envs.Environments[0]["name"] != "gpu" || envs.Environments[0]["cpu"] != 1.0 ||
		envs.Environments[0]["memory"] != 1.0 || envs.Environments[0]["disk"] != 3.0 || envs.Environments[0]["sandbox_provider"] != "local" {
		t.Fatalf("environments (Ready only): %s", r.body)
	}
	want(t, "a Failed environment", f.req("POST", "/api/v1/sessions", "alice", map[string]any{"agent": "talker", "environment": "broken"}),
		http.StatusUnprocessableEntity, api.CodeBadEnvironment)
}

// A session's whole life through the API: create, list, send, stream, delete.
func TestSessionLifecycle(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	harnesstest.AddAgent(t, f.st, "talker", "", harnesstest.AgentSpec{"model": script(text("Hello there."), text("Again."))})
	sid := f.newSession("alice", "talker")
	if !strings.HasPrefix(sid, "s-") {
		t.Fatalf("session id %q", sid)
	}
	got := f.req("GET", "/api/v1/sessions/"+sid, "alice", nil)
	want(t, "get", got, http.StatusOK, "")
	if m := got.json(t); m["agent"] != "talker" || m["owner"] != "alice" || m["running"] != false || m["last_seq"] != 0.0 || m["environment"] != nil || m["replay"] != true {
		t.Fatalf("session: %v", m)
	}
	evs, stop := f.stream("alice", sid, "")
	defer stop()
	runID := f.send("alice", sid, "hi")
	seen := until(t, evs, 10*time.Second, runFinished)
	if k := kindsOf(committed(seen)); strings.Join(k, " ") != "user_message#1 model_message#2 usage#3 run_finished#4" {
		t.Fatalf("stream: %v", k)
	}
	var fin map[string]any
	_ = json.Unmarshal([]byte(seen[len(seen)-1].data), &fin)
	if fin["run_id"] != runID || fin["status"] != store.RunCompleted {
		t.Fatalf("run_finished: %v (run %s)", fin, runID)
	}
	var msg map[string]any
	for _, e := range seen {
		if e.event == "model_message" {
			_ = json.Unmarshal([]byte(e.data), &msg)
		}
	}
	if msg["text"] != "Hello there." || msg["replay"] != true {
		t.Fatalf("model_message: %v", msg)
	}
	f.turn("alice", sid, "again")
	until(t, evs, 10*time.Second, func(e sse) bool { return e.event == "run_finished" && e.seq() == 8 })

	list := f.req("GET", "/api/v1/sessions", "alice", nil)
	var ls struct{ Sessions []map[string]any }
	_ = json.Unmarshal(list.body, &ls)
	if len(ls.Sessions) != 1 || ls.Sessions[0]["id"] != sid || ls.Sessions[0]["input_tokens"] == 0.0 {
		t.Fatalf("list: %s", list.body)
	}
	want(t, "delete", f.req("DELETE", "/api/v1/sessions/"+sid, "alice", nil), http.StatusNoContent, "")
	want(t, "get after delete", f.req("GET", "/api/v1/sessions/"+sid, "alice", nil), http.StatusNotFound, api.CodeNotFound)
	if e, _ := f.st.AuditLog(context.Background(), 0, 10); len(e) != 0 {
		t.Fatalf("a user deleting its own session is not an admin action: %+v", e)
	}
}

// A second message while a turn runs is 409; cancel ends the long turn, recorded as
// cancelled; the session takes messages again after.
func TestSecondMessageIsBusyAndCancelEndsTheTurn(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	harnesstest.AddAgent(t, f.st, "slow", "", harnesstest.AgentSpec{"model": script(
		map[string]any{"text": "late", "delay_ms": 60000}, text("after"))})
	sid := f.newSession("alice", "slow")
	want(t, "cancel with nothing running", f.req("POST", "/api/v1/sessions/"+sid+"/cancel", "alice", nil), http.StatusConflict, api.CodeNotRunning)
	runID := f.send("alice", sid, "take your time")
	r := f.req("POST", "/api/v1/sessions/"+sid+"/messages", "alice", map[string]any{"text": "and this"})
	want(t, "a second message", r, http.StatusConflict, api.CodeBusy)
	if !strings.Contains(string(r.body), runID) {
		t.Errorf("the 409 does not name the running turn %s: %s", runID, r.body)
	}
	got := f.req("GET", "/api/v1/sessions/"+sid, "alice", nil).json(t)
	if got["running"] != true || got["run_id"] != runID {
		t.Fatalf("a running session: %v", got)
	}
	want(t, "delete while running", f.req("DELETE", "/api/v1/sessions/"+sid, "alice", nil), http.StatusConflict, api.CodeBusy)
	began := time.Now()
	c := f.req("POST", "/api/v1/sessions/"+sid+"/cancel", "alice", nil)
	want(t, "cancel", c, http.StatusAccepted, "")
	if c.json(t)["run_id"] != runID {
		t.Fatalf("cancel: %s", c.body)
	}
	f.waitIdle(sid)
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("the cancel took %s", took)
	}
	if k := strings.Join(f.logKinds(sid), " "); k != "user_message#1 cancelled#2 run_finished#3" {
		t.Fatalf("log after cancel: %s", k)
	}
	runs, _ := f.st.Runs(context.Background(), sid)
	if len(runs) != 1 || runs[0].Status != store.RunCancelled {
		t.Fatalf("runs: %+v", runs)
	}
	// Not stuck: the next message starts a turn (the replay's slow step again), and
	// that one cancels too.
	f.send("alice", sid, "again")
	want(t, "cancel again", f.req("POST", "/api/v1/sessions/"+sid+"/cancel", "alice", nil), http.StatusAccepted, "")
	f.waitIdle(sid)
	if k := f.logKinds(sid); len(k) != 6 || k[5] != "run_finished#6" {
		t.Fatalf("log after the next turn: %v", k)
	}
}

// A client that sends the next message as soon as it sees run_finished is never told
// the session is busy.
func TestNextMessageRightAfterRunFinished(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	var turns []map[string]any
	for i := 0; i < 30; i++ {
		turns = append(turns, text("answer"))
	}
	harnesstest.AddAgent(t, f.st, "talker", "", harnesstest.AgentSpec{"model": script(turns...)})
	sid := f.newSession("alice", "talker")
	evs, stop := f.stream("alice", sid, "")
	defer stop()
	for i := 0; i < 30; i++ {
		f.send("alice", sid, "next")
		until(t, evs, 10*time.Second, runFinished)
	}
	want(t, "delete right after", f.req("DELETE", "/api/v1/sessions/"+sid, "alice", nil), http.StatusNoContent, "")
}

// User B can do nothing to user A's session by its id: every route answers 404 exactly as
// for a session that does not exist, and nothing of A's changes. Admins list and delete
// it (audited), but do not read it.
func TestAnotherUsersSessionIsNotFound(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	harnesstest.AddAgent(t, f.st, "slow", "", harnesstest.AgentSpec{"model": script(
		text("first"), map[string]any{"text": "late", "delay_ms": 60000})})
	sid := f.newSession("alice", "slow")
	f.turn("alice", sid, "one")
	f.send("alice", sid, "two") // a live turn bob tries to cancel
	before := f.logKinds(sid)

	ghost := "s-0000000000000000"
	for _, tc := range []struct{ method, path string }{
		{"GET", "/api/v1/sessions/%s"},
		{"GET", "/api/v1/sessions/%s/events"},
		{"POST", "/api/v1/sessions/%s/messages"},
		{"POST", "/api/v1/sessions/%s/cancel"},
		{"DELETE", "/api/v1/sessions/%s"},
		{"GET", "/api/v1/sessions/%s/files"},
		{"GET", "/api/v1/sessions/%s/files/out.txt"},
		{"GET", "/api/v1/sessions/%s/files/out.txt?workspace=1"},
	} {
		var body any
		if tc.method == "POST" {
			body = map[string]any{"text": "hijack"}
		}
		theirs := f.req(tc.method, strings.Replace(tc.path, "%s", sid, 1), "bob", body)
		none := f.req(tc.method, strings.Replace(tc.path, "%s", ghost, 1), "bob", body)
		want(t, "bob: "+tc.method+" "+tc.path, theirs, http.StatusNotFound, api.CodeNotFound)
		want(t, "bob, a missing session: "+tc.method+" "+tc.path, none, http.StatusNotFound, api.CodeNotFound)
		if strings.ReplaceAll(string(theirs.body), sid, "ID") != strings.ReplaceAll(string(none.body), ghost, "ID") {
			t.Errorf("%s %s: alice's session answers %s, a missing one %s", tc.method, tc.path, theirs.body, none.body)
		}
	}
	// Not even an admin reads it.
	want(t, "root reads alice's session", f.req("GET", "/api/v1/sessions/"+sid, "root", nil), http.StatusNotFound, api.CodeNotFound)
	want(t, "root streams alice's session", f.req("GET", "/api/v1/sessions/"+sid+"/events", "root", nil), http.StatusNotFound, api.CodeNotFound)
	var ls struct{ Sessions []map[string]any }
	_ = json.Unmarshal(f.req("GET", "/api/v1/sessions", "bob", nil).body, &ls)
	if len(ls.Sessions) != 0 {
		t.Fatalf("bob lists %v", ls.Sessions)
	}
	want(t, "bob lists everyone's", f.req("GET", "/api/v1/sessions?all=1", "bob", nil), http.StatusForbidden, api.CodeAdminOnly)
	if after := f.logKinds(sid); !slices.Equal(before, after) {
		t.Fatalf("alice's log changed: %v -> %v", before, after)
	}
	if run, err := f.st.RunningRun(context.Background(), sid); err != nil {
		t.Fatalf("bob's cancel stopped alice's turn: %v %v", run, err)
	}
	want(t, "alice cancels her turn", f.req("POST", "/api/v1/sessions/"+sid+"/cancel", "alice", nil), http.StatusAccepted, "")
	f.waitIdle(sid)

	_ = json.Unmarshal(f.req("GET", "/api/v1/sessions?all=1", "root", nil).body, &ls)
	if len(ls.Sessions) != 1 || ls.Sessions[0]["owner"] != "alice" {
		t.Fatalf("root lists: %v", ls.Sessions)
	}
	want(t, "root deletes alice's session", f.req("DELETE", "/api/v1/sessions/"+sid, "root", nil), http.StatusNoContent, "")
	audit := f.req("GET", "/api/v1/admin/audit", "root", nil)
	var a struct{ Entries []map[string]any }
	_ = json.Unmarshal(audit.body, &a)
	if len(a.Entries) != 1 || a.Entries[0]["actor"] != "root" || a.Entries[0]["action"] != "session.delete" || a.Entries[0]["target"] != sid ||
		!strings.Contains(a.Entries[0]["detail"].(string), `"alice"`) {
		t.Fatalf("audit: %s", audit.body)
	}
}

// The stream resumes exactly: dropped mid-turn and reconnected with Last-Event-ID, it
// gives the events after that id, in order, none twice and none missed; ?after=N does
// the same. The running step's text streams as deltas that never follow its
// model_message.
func TestEventStreamResumesExactly(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	var turns []map[string]any
	for i := 0; i < 6; i++ {
		turns = append(turns, map[string]any{"text": "step text number " + string(rune('a'+i)), "delay_ms": 80,
			"tool_calls": []any{map[string]any{"name": "read_output", "arguments": map[string]any{"call_id": "none"}}}})
	}
	turns = append(turns, map[string]any{"text": "All done.", "delay_ms": 80})
	harnesstest.AddAgent(t, f.st, "streamer", "", harnesstest.AgentSpec{"model": script(turns...)})
	sid := f.newSession("alice", "streamer")

	first, stop := f.stream("alice", sid, "")
	f.send("alice", sid, "go")
	part := until(t, first, 20*time.Second, func(e sse) bool { return e.event == "tool_result" && e.seq() >= 6 })
	stop() // dropped mid-turn
	last := committed(part)[len(committed(part))-1]
	// Some events are committed while nobody listens.
	time.Sleep(300 * time.Millisecond)
	second, stop2 := f.stream("alice", sid, last.id)
	defer stop2()
	rest := until(t, second, 30*time.Second, runFinished)

	all := append(committed(part), committed(rest)...)
	for i, e := range all {
		if e.seq() != int64(i+1) {
			t.Fatalf("event %d has id %s: the resumed stream repeats or misses events: %v", i+1, e.id, kindsOf(all))
		}
	}
	if got, want := kindsOf(all), f.logKinds(sid); !slices.Equal(got, want) {
		t.Fatalf("the stream's events %v\nare not the log's %v", got, want)
	}
	// Deltas: each step's text arrives in pieces before its model_message, and none
	// arrives after it.
	checkDeltas(t, append(part, rest...))

	// ?after=N gives the same tail.
	r, _ := http.NewRequest("GET", f.ts.URL+"/api/v1/sessions/"+sid+"/events?after="+last.id, nil)
	r.Header.Set("Authorization", "Bearer "+f.tokens["alice"])
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := f.ts.Client().Do(r.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan sse, 1024)
	go func() { defer resp.Body.Close(); readSSE(resp.Body, ch) }()
	tail := committed(until(t, ch, 10*time.Second, runFinished))
	if !slices.Equal(kindsOf(tail), kindsOf(committed(rest))) {
		t.Fatalf("?after=%s: %v; want %v", last.id, kindsOf(tail), kindsOf(committed(rest)))
	}
}

// checkDeltas: the deltas between two model_messages spell the second's text, offsets
// count up from 0, and nothing is left over after the last one.
func checkDeltas(t *testing.T, evs []sse) {
	t.Helper()
	var buf strings.Builder
	deltas := 0
	for _, e := range evs {
		switch e.event {
		case "delta":
			var d struct {
				Stream, Delta string
				Offset        int
			}
			_ = json.Unmarshal([]byte(e.data), &d)
			if d.Stream != "text" {
				continue
			}
			if d.Offset == 0 {
				buf.Reset()
			}
			if d.Offset != buf.Len() {
				t.Fatalf("a delta at offset %d after %d bytes", d.Offset, buf.Len())
			}
			buf.WriteString(d.Delta)
			deltas++
		case "model_message":
			var m struct{ Text string }
			_ = json.Unmarshal([]byte(e.data), &m)
			if buf.Len() > 0 && buf.String() != m.Text {
				t.Fatalf("deltas spelled %q before a model_message of %q", buf.String(), m.Text)
			}
			buf.Reset()
		}
	}
	if buf.Len() != 0 {
		t.Fatalf("deltas %q came after the last model_message", buf.String())
	}
	if deltas < 10 {
		t.Fatalf("only %d text deltas", deltas)
	}
}

// Keep-alive comments come every KeepAlive on an idle stream.
func TestEventStreamKeepAlive(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: func(c *api.Config) { c.KeepAlive = 50 * time.Millisecond }})
	harnesstest.AddAgent(t, f.st, "talker", "", harnesstest.AgentSpec{"model": script(text("Hi."))})
	sid := f.newSession("alice", "talker")
	evs, stop := f.stream("alice", sid, "")
	defer stop()
	until(t, evs, 5*time.Second, func(e sse) bool { return e.event == "keep-alive" })
}

// A stream outlives the server's ReadTimeout (serve sets one for requests).
func TestEventStreamOutlivesReadTimeout(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: func(c *api.Config) { c.KeepAlive = 50 * time.Millisecond }})
	harnesstest.AddAgent(t, f.st, "talker", "", harnesstest.AgentSpec{"model": script(text("Hi."))})
	f.ts.Close()
	f.ts = httptest.NewUnstartedServer(f.srv)
	f.ts.Config.ReadTimeout = 200 * time.Millisecond
	f.ts.Start()
	sid := f.newSession("alice", "talker")
	evs, stop := f.stream("alice", sid, "")
	defer stop()
	time.Sleep(600 * time.Millisecond)
	f.send("alice", sid, "hi")
	until(t, evs, 5*time.Second, runFinished)
}

// Shutdown cancels the turns the server runs, records them cancelled, and waits.
func TestShutdownCancelsLiveTurns(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	harnesstest.AddAgent(t, f.st, "slow", "", harnesstest.AgentSpec{"model": script(map[string]any{"text": "late", "delay_ms": 60000})})
	sid := f.newSession("alice", "slow")
	f.send("alice", sid, "go")
	if f.srv.LiveRuns() != 1 {
		t.Fatalf("%d live runs", f.srv.LiveRuns())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	runs, _ := f.st.Runs(context.Background(), sid)
	if len(runs) != 1 || runs[0].Status != store.RunCancelled || f.srv.LiveRuns() != 0 {
		t.Fatalf("after shutdown: %+v, %d live", runs, f.srv.LiveRuns())
	}
	want(t, "a message after shutdown", f.req("POST", "/api/v1/sessions/"+sid+"/messages", "alice", map[string]any{"text": "x"}),
		http.StatusServiceUnavailable, api.CodeUnavailable)
}

// Two replicas on one database: a turn run by replica A streams through replica B, and
// a cancel sent to B reaches A's run through the run's row.
func TestReplicasShareStreamsAndCancels(t *testing.T) {
	a := newFixture(t, fixtureOpts{})
	harnesstest.AddAgent(t, a.st, "slow", "", harnesstest.AgentSpec{"model": script(text("quick"), map[string]any{"text": "late", "delay_ms": 60000})})
	other, err := store.Open(context.Background(), a.st.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	b := newFixture(t, fixtureOpts{st: other, noUsers: true})
	b.tokens = a.tokens // the same users: one database
	sid := a.newSession("alice", "slow")
	evs, stop := b.stream("alice", sid, "")
	defer stop()
	a.send("alice", sid, "one")
	until(t, evs, 10*time.Second, runFinished)
	runID := a.send("alice", sid, "two")
	until(t, evs, 10*time.Second, func(e sse) bool { return e.event == "user_message" && e.seq() == 5 })
	c := b.req("POST", "/api/v1/sessions/"+sid+"/cancel", "alice", nil)
	want(t, "cancel through replica B", c, http.StatusAccepted, "")
	if c.json(t)["run_id"] != runID || !strings.Contains(c.json(t)["where"].(string), "another process") {
		t.Fatalf("cancel: %s", c.body)
	}
	fin := until(t, evs, 10*time.Second, runFinished)
	if !strings.Contains(fin[len(fin)-1].data, `"status":"cancelled"`) {
		t.Fatalf("run_finished: %s", fin[len(fin)-1].data)
	}
	want(t, "a message through B while A runs", b.req("POST", "/api/v1/sessions/"+sid+"/messages", "alice", map[string]any{"text": "x"}), http.StatusAccepted, "")
}

// The routes of one session read the token's user and the session in one statement:
// each request still reads both afresh, so a rotated-out token is refused on the very
// next request, a made-up token is 401 whatever the session, and another user's session
// (an admin's too, on these routes) is 404 like a missing one.
func TestSessionRoutesAuthorizeEachRequest(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	harnesstest.AddAgent(t, f.st, "talker", "", harnesstest.AgentSpec{"model": script(text("Hi."))})
	created := f.req("POST", "/api/v1/sessions", "alice", map[string]any{"agent": "talker"})
	want(t, "alice's session", created, http.StatusCreated, "")
	sid := created.json(t)["id"].(string)
	path := "/api/v1/sessions/" + sid
	want(t, "alice reads her session", f.req("GET", path, "alice", nil), http.StatusOK, "")
	want(t, "alice's attachments", f.req("GET", path+"/attachments", "alice", nil), http.StatusOK, "")
	want(t, "a missing session", f.req("GET", "/api/v1/sessions/nope", "alice", nil), http.StatusNotFound, api.CodeNotFound)
	for _, who := range []string{"bob", "root"} {
		want(t, who+" reads alice's session", f.req("GET", path, who, nil), http.StatusNotFound, api.CodeNotFound)
		want(t, who+" posts to alice's session", f.req("POST", path+"/messages", who, map[string]any{"text": "hi"}), http.StatusNotFound, api.CodeNotFound)
		want(t, who+" cancels alice's turn", f.req("POST", path+"/cancel", who, nil), http.StatusNotFound, api.CodeNotFound)
	}
	f.tokens["mallory"] = "tfu_" + strings.Repeat("A", 43)
	want(t, "a made-up token on a session", f.req("GET", path, "mallory", nil), http.StatusUnauthorized, api.CodeUnauthorized)
	want(t, "a made-up token on a missing session", f.req("GET", "/api/v1/sessions/nope", "mallory", nil), http.StatusUnauthorized, api.CodeUnauthorized)

	token, hash, _ := api.NewToken()
	if _, err := f.st.SetUserToken(context.Background(), "alice", hash); err != nil {
		t.Fatal(err)
	}
	want(t, "the rotated-out token on her session", f.req("GET", path, "alice", nil), http.StatusUnauthorized, api.CodeUnauthorized)
	want(t, "the rotated-out token posting", f.req("POST", path+"/messages", "alice", map[string]any{"text": "hi"}), http.StatusUnauthorized, api.CodeUnauthorized)
	f.tokens["alice"] = token
	want(t, "the new token on her session", f.req("GET", path, "alice", nil), http.StatusOK, "")
	must(t, f.st.DeleteUser(context.Background(), "bob"))
	want(t, "a removed user's token on a session route", f.req("GET", path, "bob", nil), http.StatusUnauthorized, api.CodeUnauthorized)
}
