package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Downloads on a real local sandbox: offered files with their digest and provenance;
// a symlink to a host file, a FIFO and a directory refused; a file grown past the cap
// or changed after it was offered refused as a workspace file (the offered copy stays
// what was offered); stored bytes that no longer match their digest refused; an expired
// offer gone; another user's files not found; an agent without downloads forbidden.
func TestDownloads(t *testing.T) {
	f := newFixture(t, fixtureOpts{sandboxes: true})
	harnesstest.AddAgent(t, f.st, "coder", "default", harnesstest.AgentSpec{"sandbox": harnesstest.Sandbox("default", 30, 60, 120), "model": script(
		execCall("printf hello > out.txt && printf small > big.txt && ln -s /etc/passwd link && mkfifo fifo && mkdir sub && printf deep > sub/d.txt && printf plain > plain.txt"),
		call("offer_artifact", map[string]any{"path": "out.txt", "classification": "internal"}),
		call("offer_artifact", map[string]any{"path": "big.txt"}),
		call("offer_artifact", map[string]any{"path": "link"}),
		call("offer_artifact", map[string]any{"path": "sub/d.txt", "expires_in_hours": 2}),
		text("Offered."),
		execCall("printf changed > out.txt && head -c 17000000 /dev/zero > big.txt"),
		text("Changed."),
	)})
	harnesstest.AddAgent(t, f.st, "nodl", "default", harnesstest.AgentSpec{"sandbox": map[string]any{"enabled": true, "environment": "default", "file_downloads": false},
		"model": script(execCall("printf x > x.txt"), text("ok"))})
	sid := f.newSession("alice", "coder")
	f.turn("alice", sid, "make files")
	files := "/api/v1/sessions/" + sid + "/files"

	// The symlink was never offered: offer_artifact refused it.
	evs, _ := f.st.Events(context.Background(), sid, 0)
	refused := false
	for _, e := range evs {
		if e.Kind == "tool_result" && strings.Contains(string(e.Payload), "replay-3-0") {
			refused = strings.Contains(string(e.Payload), `"is_error":true`) && strings.Contains(string(e.Payload), "symlink")
		}
	}
	if !refused {
		t.Fatalf("offer_artifact of a symlink was not refused: %v", f.logKinds(sid))
	}

	list := f.req("GET", files, "alice", nil)
	want(t, "files", list, http.StatusOK, "")
	var fl struct {
		Files     []map[string]any
		Workspace map[string]any
	}
	_ = json.Unmarshal(list.body, &fl)
	if len(fl.Files) != 3 || fl.Files[0]["path"] != "out.txt" || fl.Files[1]["path"] != "big.txt" || fl.Files[2]["path"] != "sub/d.txt" ||
		fl.Files[0]["classification"] != "internal" || fl.Files[0]["url"] != files+"/out.txt" || fl.Workspace != nil ||
		fl.Files[0]["detected_type"] != "text" || fl.Files[0]["may_download"] != true { // the type recorded by offer_artifact
		t.Fatalf("offered files: %s", list.body)
	}

	// An offered file, with its headers.
	r := f.req("GET", files+"/out.txt", "alice", nil)
	want(t, "download out.txt", r, http.StatusOK, "")
	sum := sha256.Sum256([]byte("hello"))
	hexSum := hex.EncodeToString(sum[:])
	for k, v := range map[string]string{
		"Content-Disposition":        `attachment; filename="out.txt"; filename*=UTF-8''out.txt`,
		"Content-Type":               "application/octet-stream",
		"Digest":                     "sha-256=" + base64.StdEncoding.EncodeToString(sum[:]),
		"X-Trueforge-SHA256":         hexSum,
		"X-Trueforge-Classification": "internal",
		"X-Trueforge-Offered":        "true",
		"X-Trueforge-Snapshot":       f.env.Snapshot,
		"X-Trueforge-Source-Event":   fmt.Sprint(int64(fl.Files[0]["source_event"].(float64))),
	} {
		if got := r.Header.Get(k); got != v {
			t.Errorf("%s: %q; want %q", k, got, v)
		}
	}
	if string(r.body) != "hello" || fl.Files[0]["sha256"] != hexSum {
		t.Fatalf("out.txt: %q (listed sha256 %v)", r.body, fl.Files[0]["sha256"])
	}
	exp, err := time.Parse(time.RFC3339, r.Header.Get("X-Trueforge-Expires"))
	if err != nil || exp.Before(time.Now().Add(167*time.Hour)) {
		t.Errorf("X-Trueforge-Expires %q", r.Header.Get("X-Trueforge-Expires"))
	}
	if d := f.req("GET", files+"/sub/d.txt", "alice", nil); d.StatusCode != 200 || string(d.body) != "deep" {
		t.Fatalf("sub/d.txt: %d %s", d.StatusCode, d.body)
	}

	// What was never offered, and what is not a regular file.
	want(t, "a file never offered", f.req("GET", files+"/plain.txt", "alice", nil), http.StatusNotFound, api.CodeNotOffered)
	want(t, "the symlink, as offered", f.req("GET", files+"/link", "alice", nil), http.StatusNotFound, api.CodeNotOffered)
	for _, tc := range []struct{ path, says string }{
		{"link", "symlink"}, {"fifo", "named pipe"}, {"sub", "directory"},
	} {
		r := f.req("GET", files+"/"+tc.path+"?workspace=1", "alice", nil)
		want(t, tc.path+" from the workspace", r, http.StatusUnprocessableEntity, api.CodeNotRegular)
		if !strings.Contains(r.errMessage(), tc.says) || strings.Contains(string(r.body), "root:") {
			t.Errorf("%s: %s", tc.path, r.body)
		}
	}
	want(t, "a path out of the workspace", f.req("GET", files+"/..%2F..%2Fetc%2Fpasswd?workspace=1", "alice", nil), http.StatusBadRequest, api.CodeBadRequest)
	want(t, "a missing workspace file", f.req("GET", files+"/nope.txt?workspace=1", "alice", nil), http.StatusNotFound, api.CodeNotFound)
	plain := f.req("GET", files+"/plain.txt?workspace=1", "alice", nil)
	want(t, "a workspace file never offered", plain, http.StatusOK, "")
	if string(plain.body) != "plain" || plain.Header.Get("X-Trueforge-Offered") != "false" || plain.Header.Get("X-Trueforge-Classification") != "untrusted" ||
		plain.Header.Get("X-Trueforge-Source-Event") != "" || plain.Header.Get("X-Trueforge-Snapshot") != f.env.Snapshot {
		t.Fatalf("plain.txt from the workspace: %q %v", plain.body, plain.Header)
	}
	ws := f.req("GET", files+"?workspace=1", "alice", nil)
	_ = json.Unmarshal(ws.body, &fl)
	types := map[string]string{}
	for _, e := range fl.Workspace["entries"].([]any) {
		m := e.(map[string]any)
		types[m["path"].(string)] = m["type"].(string)
	}
	if types["link"] != "symlink" || types["fifo"] != "fifo" || types["sub"] != "dir" || types["out.txt"] != "file" {
		t.Fatalf("workspace listing: %s", ws.body)
	}

	// Another user: nothing, as for a missing session.
	want(t, "bob downloads alice's file", f.req("GET", files+"/out.txt", "bob", nil), http.StatusNotFound, api.CodeNotFound)
	want(t, "bob reads alice's workspace", f.req("GET", files+"/plain.txt?workspace=1", "bob", nil), http.StatusNotFound, api.CodeNotFound)
	want(t, "bob lists alice's files", f.req("GET", files+"?workspace=1", "bob", nil), http.StatusNotFound, api.CodeNotFound)

	// Changed and grown after they were offered.
	f.turn("alice", sid, "change them")
	r = f.req("GET", files+"/out.txt?workspace=1", "alice", nil)
	want(t, "out.txt changed after its offer", r, http.StatusConflict, api.CodeDigestMismatch)
	if !strings.Contains(r.errMessage(), "changed in the workspace after it was offered") || !strings.Contains(r.errMessage(), hexSum) {
		t.Errorf("digest mismatch: %s", r.body)
	}
	r = f.req("GET", files+"/big.txt?workspace=1", "alice", nil)
	want(t, "big.txt grown past the cap", r, http.StatusUnprocessableEntity, api.CodeFileTooLarge)
	if !strings.Contains(r.errMessage(), "16777216") {
		t.Errorf("too large: %s", r.body)
	}
	if r := f.req("GET", files+"/out.txt", "alice", nil); r.StatusCode != 200 || string(r.body) != "hello" {
		t.Fatalf("the offered copy of out.txt after the change: %d %q; want what was offered", r.StatusCode, r.body)
	}
	if r := f.req("GET", files+"/big.txt", "alice", nil); r.StatusCode != 200 || string(r.body) != "small" {
		t.Fatalf("the offered copy of big.txt after it grew: %d, %d bytes", r.StatusCode, len(r.body))
	}

	// Stored bytes that no longer hash to the recorded digest are never handed out.
	if _, err := f.st.Exec(context.Background(), `UPDATE artifacts SET content = ? WHERE session_id = ? AND path = ?`, []byte("evil!"), sid, "out.txt"); err != nil {
		t.Fatal(err)
	}
	r = f.req("GET", files+"/out.txt", "alice", nil)
	want(t, "tampered stored bytes", r, http.StatusConflict, api.CodeDigestMismatch)
	if strings.Contains(string(r.body), "evil") {
		t.Fatal("the tampered bytes were sent")
	}

	// Offers expire.
	f.clock.Advance(3 * time.Hour)
	want(t, "an expired offer", f.req("GET", files+"/sub/d.txt", "alice", nil), http.StatusGone, api.CodeExpired)
	_ = json.Unmarshal(f.req("GET", files, "alice", nil).body, &fl)
	if fl.Files[2]["expired"] != true || fl.Files[1]["expired"] != false {
		t.Fatalf("expired flags: %v", fl.Files)
	}

	// An agent without downloads: 403 on every file route.
	nd := f.newSession("alice", "nodl")
	f.turn("alice", nd, "go")
	for _, p := range []string{"", "/x.txt", "/x.txt?workspace=1", "?workspace=1"} {
		want(t, "nodl files"+p, f.req("GET", "/api/v1/sessions/"+nd+"/files"+p, "alice", nil), http.StatusForbidden, api.CodeDownloadsOff)
	}

	// Deleting the session deletes its sandbox.
	rec, err := f.st.GetSessionSandbox(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	want(t, "delete", f.req("DELETE", "/api/v1/sessions/"+sid, "alice", nil), http.StatusNoContent, "")
	if _, err := f.env.Runtime.Get(context.Background(), rec.SandboxID); err == nil {
		t.Fatalf("sandbox %s outlived its session", rec.SandboxID)
	}
}

// A session created on a one-off environment gets its sandbox from that environment;
// the agent's own sessions keep theirs.
func TestOneOffEnvironment(t *testing.T) {
	f := newFixture(t, fixtureOpts{sandboxes: true})
	ctx := context.Background()
	must(t, f.st.CreateEnvironment(ctx, store.Environment{ID: "env-alt", Name: "alt", Provider: "local", Owner: harnesstest.Owner,
		Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "release-alt", SnapshotID: f.env.Snapshot, Env: map[string]string{"GREETING": "from-alt"}}))
	harnesstest.AddAgent(t, f.st, "greeter", "default", harnesstest.AgentSpec{"sandbox": harnesstest.Sandbox("default", 30, 60, 120),
		"model": script(execCall("echo greeting=$GREETING"), text("done"))})
	for _, tc := range []struct{ env, greeting string }{{"alt", "from-alt"}, {"", "hello"}} {
		body := map[string]any{"agent": "greeter"}
		if tc.env != "" {
			body["environment"] = tc.env
		}
		r := f.req("POST", "/api/v1/sessions", "alice", body)
		want(t, "create on "+tc.env, r, http.StatusCreated, "")
		sid := r.json(t)["id"].(string)
		f.turn("alice", sid, "greet")
		evs, _ := f.st.Events(ctx, sid, 0)
		var out string
		for _, e := range evs {
			if e.Kind == "tool_result" {
				out = string(e.Payload)
			}
		}
		if !strings.Contains(out, "greeting="+tc.greeting) {
			t.Fatalf("session on %q: %s", tc.env, out)
		}
		got := f.req("GET", "/api/v1/sessions/"+sid, "alice", nil).json(t)
		sb := got["sandbox"].(map[string]any)
		wantEnv := tc.env
		if wantEnv == "" {
			wantEnv = "default"
			if got["environment"] != nil {
				t.Errorf("environment %v; want null", got["environment"])
			}
		} else if got["environment"] != tc.env {
			t.Errorf("environment %v; want %s", got["environment"], tc.env)
		}
		if sb["environment"] != wantEnv {
			t.Fatalf("sandbox %v; want one of environment %s", sb, wantEnv)
		}
	}
	// Metrics after two sandboxes and four model steps.
	m := f.scrape()
	m.histogram(t, "trueforge_sandbox_provision_seconds", 2)
	if got := m.value(t, "trueforge_model_steps_total", dto.MetricType_COUNTER); got != 4 {
		t.Errorf("model steps %v; want 4", got)
	}
	harnesstest.AddEnvironment(t, f.st, "building", "Building")
	want(t, "a Building environment", f.req("POST", "/api/v1/sessions", "alice", map[string]any{"agent": "greeter", "environment": "building"}),
		http.StatusUnprocessableEntity, api.CodeBadEnvironment)
	want(t, "a missing environment", f.req("POST", "/api/v1/sessions", "alice", map[string]any{"agent": "greeter", "environment": "ghost"}),
		http.StatusUnprocessableEntity, api.CodeBadEnvironment)
}
