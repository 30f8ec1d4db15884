package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sessions"
)

// upload posts content as an attachment of session sid named name (query string q
// added as is) with content type ct.
func (f *fixture) upload(user, sid, query, ct string, content []byte) response {
	f.t.Helper()
	r, err := http.NewRequest("POST", f.ts.URL+"/api/v1/sessions/"+sid+"/attachments?"+query, bytes.NewReader(content))
	if err != nil {
		f.t.Fatal(err)
	}
	if ct != "" {
		r.Header.Set("Content-Type", ct)
	}
	r.Header.Set("Authorization", "Bearer "+f.tokens[user])
	return f.do(r)
}

// Attachments end to end on a real local sandbox: stored with digest, types and
// classification, provisioning nothing; described to the model; written into the
// workspace by the first call that needs the sandbox; unsafe and repeated names made
// safe; another user's session and attachments 404 everywhere; caps and bad input
// answered with the field and the fix.
func TestAttachments(t *testing.T) {
	f := newFixture(t, fixtureOpts{sandboxes: true})
	harnesstest.AddAgent(t, f.st, "reader", "default", harnesstest.AgentSpec{"sandbox": harnesstest.Sandbox("default", 30, 60, 120), "model": script(
		text("I see the file."),
		execCall("cat /workspace/attachments/notes.txt; ls /workspace/attachments"),
		text("Read it."),
	)})
	sid := f.newSession("alice", "reader")
	content := []byte("line one\nline two\n")
	sum := sha256.Sum256(content)

	r := f.upload("alice", sid, "name=notes.txt&classification=internal", "text/plain; charset=utf-8", content)
	want(t, "upload", r, http.StatusCreated, "")
	att := r.json(t)
	if att["name"] != "notes.txt" || att["path"] != "/workspace/attachments/notes.txt" || att["sha256"] != hex.EncodeToString(sum[:]) ||
		att["size"] != float64(len(content)) || att["declared_type"] != "text/plain" || att["detected_type"] != "text" ||
		att["classification"] != "internal" || att["uploader"] != "alice" || att["in_workspace"] != false {
		t.Fatalf("attachment: %s", r.body)
	}
	id := att["id"].(string)
	if _, err := sessions.Sandbox(context.Background(), f.st, sid); !errors.Is(err, sessions.ErrNoSandbox) {
		t.Fatalf("storing an attachment provisioned a sandbox: %v", err)
	}

	// Names: a path keeps its last element; a repeated name gets a suffix; the default
	// classification is untrusted.
	r = f.upload("alice", sid, "name=..%2F..%2Fetc%2Fnotes.txt", "", []byte("other"))
	want(t, "upload a path", r, http.StatusCreated, "")
	if a := r.json(t); a["name"] != "notes-2.txt" || a["classification"] != "untrusted" || a["original_name"] != "../../etc/notes.txt" {
		t.Fatalf("second upload: %s", r.body)
	}
	second := r.json(t)["id"].(string)

	// Bad input names the field and the fix.
	for _, c := range []struct{ query, code, says string }{
		{"", "bad_request", "name is missing"},
		{"name=x.txt&classification=secret", "bad_request", "classification"},
		{"name=%2E%2E%2F", "bad_request", "leaves no name"},
	} {
		r := f.upload("alice", sid, c.query, "", []byte("x"))
		want(t, "upload "+c.query, r, http.StatusBadRequest, c.code)
		if !strings.Contains(r.errMessage(), c.says) {
			t.Fatalf("upload %q: %s", c.query, r.body)
		}
	}
	want(t, "empty upload", f.upload("alice", sid, "name=e.txt", "", nil), http.StatusBadRequest, "bad_request")
	f.attach.MaxBytes = 8
	want(t, "too large", f.upload("alice", sid, "name=big.txt", "", []byte("0123456789")), http.StatusRequestEntityTooLarge, "body_too_large")
	f.attach.MaxBytes = 0

	// Another user: the session, its attachments and sending them are all 404.
	base := "/api/v1/sessions/" + sid + "/attachments"
	want(t, "bob lists", f.req("GET", base, "bob", nil), http.StatusNotFound, "not_found")
	want(t, "bob reads", f.req("GET", base+"/"+id, "bob", nil), http.StatusNotFound, "not_found")
	want(t, "bob deletes", f.req("DELETE", base+"/"+id, "bob", nil), http.StatusNotFound, "not_found")
	want(t, "bob uploads", f.upload("bob", sid, "name=x.txt", "", []byte("x")), http.StatusNotFound, "not_found")
	bobs := f.newSession("bob", "reader")
	r = f.req("POST", "/api/v1/sessions/"+bobs+"/messages", "bob", map[string]any{"text": "read", "attachments": []string{id}})
	want(t, "bob sends alice's attachment", r, http.StatusNotFound, "not_found")
	if !strings.Contains(r.errMessage(), "attachments[0]") {
		t.Fatalf("the refusal does not name the field: %s", r.body)
	}

	// A message carrying it: the model is told where, what and which digest, and no
	// sandbox is made for a turn that needs none.
	r = f.req("POST", "/api/v1/sessions/"+sid+"/messages", "alice", map[string]any{"text": "read my notes", "attachments": []string{id}})
	want(t, "send with attachment", r, http.StatusAccepted, "")
	f.waitIdle(sid)
	if _, err := sessions.Sandbox(context.Background(), f.st, sid); !errors.Is(err, sessions.ErrNoSandbox) {
		t.Fatalf("a turn without tool calls provisioned a sandbox: %v", err)
	}
	evs, err := f.st.Events(context.Background(), sid, 0)
	must(t, err)
	var um events.UserMessage
	for _, e := range evs {
		if e.Kind == events.KindUserMessage {
			must(t, json.Unmarshal(e.Payload, &um))
		}
	}
	if len(um.Attachments) != 1 || um.Attachments[0].ID != id || um.Attachments[0].Path != "/workspace/attachments/notes.txt" {
		t.Fatalf("user message: %+v", um)
	}
	hist := runner.History(evs)
	if seen := hist[0].Text; !strings.Contains(seen, "/workspace/attachments/notes.txt: 18 bytes, type text (declared text/plain), sha256 "+hex.EncodeToString(sum[:])+", classified internal") {
		t.Fatalf("what the model read: %q", seen)
	}

	// The first call that needs the sandbox finds the files there.
	f.turn("alice", sid, "now read it")
	evs, err = f.st.Events(context.Background(), sid, 0)
	must(t, err)
	var res events.ToolResult
	for _, e := range evs {
		if e.Kind == events.KindToolResult {
			must(t, json.Unmarshal(e.Payload, &res))
		}
	}
	if !strings.Contains(res.Text, "line one\nline two\nnotes-2.txt\nnotes.txt") || !strings.Contains(res.Text, "attachment written to /workspace/attachments/notes.txt") {
		t.Fatalf("exec result: %q", res.Text)
	}
	r = f.req("GET", base+"/"+id, "alice", nil)
	want(t, "read attachment", r, http.StatusOK, "")
	if r.json(t)["in_workspace"] != true {
		t.Fatalf("not marked written: %s", r.body)
	}

	// Deleting one: gone from the list.
	want(t, "delete", f.req("DELETE", base+"/"+second, "alice", nil), http.StatusNoContent, "")
	want(t, "read deleted", f.req("GET", base+"/"+second, "alice", nil), http.StatusNotFound, "not_found")
	r = f.req("GET", base, "alice", nil)
	var list struct{ Attachments []map[string]any }
	must(t, json.Unmarshal(r.body, &list))
	if len(list.Attachments) != 1 || list.Attachments[0]["id"] != id {
		t.Fatalf("list: %s", r.body)
	}
}
