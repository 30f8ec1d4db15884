package web_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/trueforge/terraform-provider-trueforge/internal/clamtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api/web"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/attachments"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sessions"
	"github.com/trueforge/terraform-provider-trueforge/internal/scan"
)

// repoArchive is a repository as a user would attach it: a README, a source file, 16 MiB
// of data that does not compress (so the upload takes long enough to be seen), and one
// hostile entry that climbs out of the destination.
func repoArchive(t *testing.T) []byte {
	t.Helper()
	noise := make([]byte, 16<<20)
	_, _ = rand.Read(noise)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		body []byte
	}{
		{"repo/README.md", []byte("# demo\nA small repository.\n")},
		{"repo/src/main.py", []byte("print('hello')\n")},
		{"repo/data/blob.bin", noise},
		{"../escape.txt", []byte("written outside the destination\n")},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// slowUploads reads attachment uploads at about 6 MiB/s, so that the page's progress
// bar can be seen moving (loopback socket buffers take the first megabytes at once);
// everything else passes straight through.
func slowUploads(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/attachments") {
			r.Body = &slowReader{r: r.Body}
		}
		h.ServeHTTP(w, r)
	})
}

type slowReader struct{ r io.ReadCloser }

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(5 * time.Millisecond)
	return s.r.Read(p[:min(len(p), 32<<10)])
}

func (s *slowReader) Close() error { return s.r.Close() }

// An archive attached in the chat, by the button and by drag and drop: the upload's
// progress shows, the message carries both files, the agent extracts the archive (its
// hostile entry refused and shown), offers a report, and the download card shows the
// report's type, malware scan and classification. Screenshots at 1280×800 and 390×844.
func TestWebAttachmentsEndToEnd(t *testing.T) {
	chrome := findBrowser(t)
	env := harnesstest.NewEnv(t)
	st := env.Store
	clamd := clamtest.Start(t)
	ctx := context.Background()
	harnesstest.AddAgent(t, st, "maintainer", "default", harnesstest.AgentSpec{
		"description": "Maintains repositories you give it.",
		"model": harnesstest.Script(
			map[string]any{"text": "I will unpack the repository.", "tool_calls": []any{
				map[string]any{"name": "extract_archive", "arguments": map[string]any{"path": "attachments/repo.tar.gz", "dest": "repo"}},
			}},
			map[string]any{"tool_calls": []any{
				map[string]any{"name": "exec", "arguments": map[string]any{"command": "cd repo && find . -type f | sort > ../report.txt && cat /workspace/attachments/notes.txt >> ../report.txt"}},
				map[string]any{"name": "offer_artifact", "arguments": map[string]any{"path": "report.txt", "classification": "internal"}},
			}},
			map[string]any{"text": "Unpacked; one entry tried to leave the folder and was refused. The file list is in `report.txt`."},
		),
		"sandbox": harnesstest.Sandbox("default", 30, 60, 120),
	})
	token := signUp(t, st, "alice")
	manager := lifecycle.New(lifecycle.Config{Store: st, Runtimes: harnesstest.Source{C: env.Runtime}})
	atts := &attachments.Service{Store: st, Dir: t.TempDir()}
	scanner, err := scan.Parse("unix:" + clamd.Socket)
	if err != nil {
		t.Fatal(err)
	}
	base := harnesstest.Runners(st, manager)
	srv := api.New(api.Config{
		Store: st, Sandboxes: manager, Runtimes: harnesstest.Source{C: env.Runtime}, Web: web.Handler(),
		Attachments: atts, Scanner: &scanner,
		Runner: func(ctx context.Context, agent, user string) (*runner.Runner, error) {
			r, err := base(ctx, agent, user)
			if err == nil {
				r.Tools.Attachments = atts
				r.Tools.Scans = &sessions.OfferScans{Store: st, Scanner: &scanner}
			}
			return r, err
		},
	})
	ts := serveWeb(t, srv, slowUploads)

	archive := filepath.Join(t.TempDir(), "repo.tar.gz")
	if err := os.WriteFile(archive, repoArchive(t), 0o600); err != nil {
		t.Fatal(err)
	}
	x := newE2E(t, chrome, st, ts, token)
	x.enter(token, `!document.getElementById('shell').hidden && document.querySelectorAll('#agent option').length > 0`)

	// The button (a file chooser) and a drop on the chat.
	x.do("choosing a file", chromedp.SetUploadFiles(chromedp.ID("file-input"), []string{archive}))
	x.wait("the chosen file's chip", `document.querySelectorAll('#attach-list .attach-chip').length === 1`, 5*time.Second)
	x.do("dropping a file", chromedp.Evaluate[chromedp.Void](`(() => {
		const dt = new DataTransfer();
		dt.items.add(new File(['remember: tests first\n'], 'notes.txt', { type: 'text/plain' }));
		const target = document.getElementById('scroller');
		for (const type of ['dragenter', 'dragover', 'drop']) target.dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
	})()`))
	x.wait("both chips", `document.querySelectorAll('#attach-list .attach-chip').length === 2`, 5*time.Second)
	// The uploader says what the notes are; the archive stays untrusted.
	x.do("classifying the notes", chromedp.Evaluate[chromedp.Void](`(s => { s.value = 'internal'; s.dispatchEvent(new Event('change')); })(
		document.querySelector('#attach-list .attach-chip:nth-child(2) select.attach-class'))`))
	x.shot("attach-chips-phone", 390, 844, false)
	x.do("back to the desktop", desktop)
	names := eval[[]string](x, `[...document.querySelectorAll('#attach-list .attach-name')].map(e => e.textContent)`)
	if len(names) != 2 || names[0] != "repo.tar.gz" || names[1] != "notes.txt" {
		t.Fatalf("chips %q", names)
	}

	// Sending uploads them, the progress bar moving, then sends the message.
	x.do("watching the progress bars", chromedp.Evaluate[chromedp.Void](`(() => {
		window.progressSeen = [];
		new MutationObserver((ms) => ms.forEach((m) => window.progressSeen.push(+m.target.getAttribute('aria-valuenow'))))
			.observe(document.getElementById('attach-list'), { attributes: true, subtree: true, attributeFilter: ['aria-valuenow'] });
	})()`))
	x.send("Please unpack my repository and list its files.")
	x.wait("the upload's progress", `[...document.querySelectorAll('.attach-progress')].some(b => !b.hidden && +b.getAttribute('aria-valuenow') > 0 && +b.getAttribute('aria-valuenow') < 100)`, 10*time.Second)
	x.shot("attach-uploading", 1280, 800, false)
	x.wait("the message with its files", `document.querySelectorAll('.turn.user .msg-attachment').length === 2`, 30*time.Second)
	// The composer empties once the POST is answered, which the event stream may beat:
	// the message can be on the page a moment before.
	x.wait("the composer emptied after sending", `document.querySelectorAll('#attach-list .attach-chip').length === 0`, 10*time.Second)
	if seen := eval[[]int](x, `window.progressSeen`); !containsFunc(seen, func(v int) bool { return v > 0 && v < 100 }) {
		t.Errorf("the progress bar went %v, never part way", seen)
	}
	chip := eval[string](x, `document.querySelector('.turn.user .msg-attachment').textContent`)
	if !strings.Contains(chip, "repo.tar.gz") || !strings.Contains(chip, "gzip") || !strings.Contains(chip, "untrusted") {
		t.Errorf("the message's attachment chip says %q", chip)
	}

	// The agent extracts it: the refused entry is named in the step, and nothing was
	// written outside the destination (checked in the store's events).
	x.wait("the offered report", `document.querySelector('.file-card a.file-download')`, 60*time.Second)
	x.wait("the turn's end", `!document.getElementById('send').hidden`, 30*time.Second)
	x.do("opening the extract step", chromedp.Click(chromedp.CSS(`.step[data-tool="extract_archive"] > summary`)))
	step := eval[string](x, `document.querySelector('.step[data-tool="extract_archive"] .step-body').textContent`)
	if !strings.Contains(step, "../escape.txt") {
		t.Errorf("the extract step does not name the refused entry: %q", step)
	}
	// The card's verdicts: classified internal, text, scanned clean as it was offered
	// (before anyone downloaded it).
	x.wait("the file card's verdicts", `[...document.querySelectorAll('.file-card [data-verdict]')].map(b => b.textContent).join(' ') === 'internal text scan clean'`, 10*time.Second)
	x.shot("attach-desktop", 1280, 800, false)
	x.shot("attach-phone", 390, 844, false)

	// The store's side: both attachments, written into the sandbox; the user message
	// carries them with their digests.
	ss, err := st.ListSessions(ctx, "alice", "maintainer")
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions %v, %v", ss, err)
	}
	as, err := st.ListAttachments(ctx, ss[0].ID)
	if err != nil || len(as) != 2 || as[0].WrittenSandbox == "" || as[1].WrittenSandbox == "" || as[0].DetectedType != "gzip" || as[1].DeclaredType != "text/plain" ||
		as[0].Classification != "untrusted" || as[1].Classification != "internal" {
		t.Fatalf("attachments %+v, %v", as, err)
	}
	// The report was made from the extracted repository: its lineage names the archive
	// and the attachment it came from.
	arts, err := st.ListArtifacts(ctx, ss[0].ID)
	if err != nil || len(arts) != 1 || len(arts[0].Provenance) != 1 || arts[0].Provenance[0].ArchiveSHA256 != as[0].SHA256 ||
		arts[0].Provenance[0].AttachmentID != as[0].ID || arts[0].Provenance[0].Role != "workspace" {
		t.Fatalf("the report's lineage: %+v, %v", arts, err)
	}
	evs, err := st.EventsOfKind(ctx, ss[0].ID, events.KindUserMessage)
	if err != nil || len(evs) != 1 {
		t.Fatalf("user messages %v, %v", evs, err)
	}
	var um events.UserMessage
	if err := json.Unmarshal(evs[0].Payload, &um); err != nil || len(um.Attachments) != 2 || um.Attachments[0].SHA256 != as[0].SHA256 {
		t.Fatalf("user message %+v, %v", um, err)
	}
}

func containsFunc(vs []int, f func(int) bool) bool {
	for _, v := range vs {
		if f(v) {
			return true
		}
	}
	return false
}
