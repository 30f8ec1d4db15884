package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/clamtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sessions"
	"github.com/trueforge/terraform-provider-trueforge/internal/scan"
)

// countingScanner counts the scans it passes on.
type countingScanner struct {
	sc sessions.Scanner
	n  atomic.Int64
}

func (c *countingScanner) Scan(ctx context.Context, r io.Reader) (scan.Verdict, error) {
	c.n.Add(1)
	return c.sc.Scan(ctx, r)
}

// Downloads scanned by a real clamd: a clean file downloads with its verdict in a
// header; EICAR is 403 malware for its owner, again without a second scan, offered or
// as a workspace file (the verdict is the digest's), with one malware_found in the log;
// with clamd stopped an unscanned file is 503 scanner_unavailable, and downloads when
// the server fails open.
func TestDownloadsScanned(t *testing.T) {
	c := clamtest.Start(t)
	sc := &countingScanner{sc: &scan.Clamd{Network: "unix", Address: c.Socket, Timeout: 30 * time.Second, MaxStream: c.StreamMaxLength}}
	f := newFixture(t, fixtureOpts{sandboxes: true, cfg: func(cfg *api.Config) { cfg.Scanner = sc }})
	harnesstest.AddAgent(t, f.st, "coder", "default", harnesstest.AgentSpec{"sandbox": harnesstest.Sandbox("default", 30, 60, 120), "model": script(
		execCall("printf '%s' '"+clamtest.EICAR+"' > eicar.com && printf clean > clean.txt && printf later > later.txt"),
		call("offer_artifact", map[string]any{"path": "clean.txt"}),
		call("offer_artifact", map[string]any{"path": "eicar.com"}),
		call("offer_artifact", map[string]any{"path": "later.txt"}),
		text("Offered."),
	)})
	sid := f.newSession("alice", "coder")
	f.turn("alice", sid, "make files")
	files := "/api/v1/sessions/" + sid + "/files"

	r := f.req("GET", files+"/clean.txt", "alice", nil)
	want(t, "the clean file", r, http.StatusOK, "")
	if string(r.body) != "clean" || !strings.HasPrefix(r.Header.Get("X-Trueforge-Scan"), "clean (ClamAV ") {
		t.Fatalf("clean.txt: %q, X-Trueforge-Scan %q", r.body, r.Header.Get("X-Trueforge-Scan"))
	}
	for _, u := range []string{files + "/eicar.com", files + "/eicar.com", files + "/eicar.com?workspace=1"} {
		r := f.req("GET", u, "alice", nil)
		want(t, u, r, http.StatusForbidden, api.CodeMalware)
		if msg := r.errMessage(); !strings.Contains(msg, "eicar.com was blocked: the malware scanner found "+clamtest.Reported) {
			t.Errorf("%s: %q", u, msg)
		}
	}
	if n := sc.n.Load(); n != 2 {
		t.Errorf("%d scans of 2 files; want 2 (one per digest)", n)
	}
	evs, err := f.st.EventsOfKind(context.Background(), sid, events.KindMalwareFound)
	if err != nil || len(evs) != 1 {
		t.Fatalf("%d malware_found events, %v; want 1", len(evs), err)
	}
	if m, ok := events.As[events.MalwareFound](evs[0].Kind, evs[0].Payload); !ok || m.Path != "eicar.com" || m.Signature != clamtest.Reported ||
		!m.Offered || !strings.HasPrefix(m.Scanner, "ClamAV ") || len(m.SHA256) != 64 {
		t.Errorf("malware_found %+v", m)
	}

	c.Stop()
	want(t, "the clean file, with clamd stopped", f.req("GET", files+"/clean.txt", "alice", nil), http.StatusOK, "")
	r = f.req("GET", files+"/later.txt", "alice", nil)
	want(t, "an unscanned file, with clamd stopped", r, http.StatusServiceUnavailable, api.CodeScannerDown)
	want(t, "an unscanned workspace file, with clamd stopped", f.req("GET", files+"/later.txt?workspace=1", "alice", nil),
		http.StatusServiceUnavailable, api.CodeScannerDown)

	// Another server over the same store that fails open.
	cfg := f.config()
	cfg.Scanner, cfg.ScannerFailOpen = sc, true
	open := *f
	open.srv = api.New(cfg)
	open.ts = httptest.NewServer(open.srv)
	shutDownAtEnd(t, open.srv, open.ts)
	r = open.req("GET", files+"/later.txt", "alice", nil)
	want(t, "an unscanned file, failing open", r, http.StatusOK, "")
	if string(r.body) != "later" || r.Header.Get("X-Trueforge-Scan") != "" {
		t.Errorf("later.txt failing open: %q, X-Trueforge-Scan %q", r.body, r.Header.Get("X-Trueforge-Scan"))
	}
	want(t, "EICAR, failing open", open.req("GET", files+"/eicar.com", "alice", nil), http.StatusForbidden, api.CodeMalware)
}
