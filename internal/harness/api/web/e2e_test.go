package web_test

// The web page end to end, in headless Chromium (Debian's chromium package), driven
// through the Chrome DevTools Protocol with chromedp: the real API server (api.New) on
// loopback with the real store, a user and its token, and a scripted agent on the local
// sandbox backend. See docs/guides/web-chat.md ("Tested in a real browser").

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api/web"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/approvals"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/budgets"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func TestMain(m *testing.M) {
	backends.ReexecMain() // the local backend re-executes this test binary as its helpers
	os.Exit(m.Run())
}

// report is the file the code turn writes and offers.
const report = "city,temp_c\nParis,21\nOslo,12\nLisbon,24\n"

// findBrowser is the Chromium to drive: $CHROMIUM, else chromium (Debian's package) or
// another Chromium or Chrome on PATH. Without one the test skips, unless
// TRUEFORGE_REQUIRE_BROWSER=1 (make test sets it, after scripts/deps.sh --tests
// installed chromium): then it fails, naming the package to install.
func findBrowser(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium found (looked for $CHROMIUM, chromium, chromium-browser, google-chrome); install Debian's chromium package (apt-get install -y chromium, or scripts/deps.sh --tests)"
	if os.Getenv("TRUEFORGE_REQUIRE_BROWSER") == "1" {
		t.Fatalf("TRUEFORGE_REQUIRE_BROWSER=1: %s", msg)
	}
	t.Skipf("skipping the browser test: %s; TRUEFORGE_REQUIRE_BROWSER=1 makes this a failure", msg)
	return ""
}

// screenshotDir is .tmp/screenshots of the repository (gitignored).
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
	out := filepath.Join(dir, ".tmp", "screenshots")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

type e2e struct {
	t       *testing.T
	ctx     context.Context
	st      *store.Store
	srv     *httptest.Server
	base    string
	token   string
	sid     string // the chat's session, once it exists
	shots   string
	console chan string
}

func TestWebPageEndToEnd(t *testing.T) {
	chrome := findBrowser(t)
	env := harnesstest.NewEnv(t) // skips without bubblewrap, as every sandbox test does
	st := env.Store

	// A scripted agent: an answer with no code, then a code turn that writes, checks and
	// offers a file, then a turn that runs a long command (cancelled).
	turns := []map[string]any{
		// Markup in the model's text is shown as text; only safe links become links.
		{"text": "Paris is the **capital of France**, on the Seine ([more](https://en.wikipedia.org/wiki/Paris)).\n\n" +
			"Not markup: <img src=x onerror=\"window.pwned=1\"> [click](javascript:window.pwned=2)"},
		{"text": "I will build the table in a sandbox.", "tool_calls": []any{
			map[string]any{"name": "write_file", "arguments": map[string]any{"path": "out/report.csv", "content": report}},
			map[string]any{"name": "exec", "arguments": map[string]any{"command": "sha256sum out/report.csv && wc -l out/report.csv"}},
		}},
		{"tool_calls": []any{map[string]any{"name": "offer_artifact", "arguments": map[string]any{"path": "out/report.csv", "classification": "internal"}}}},
		{"text": "Here is `out/report.csv`: three cities, mean 19 °C."},
		{"text": "Starting the long job.", "tool_calls": []any{
			map[string]any{"name": "exec", "arguments": map[string]any{"command": "sleep 60", "timeout_seconds": 300}},
		}},
	}
	harnesstest.AddAgent(t, st, "analyst", "default", harnesstest.AgentSpec{
		"description": "Answers questions about your data; runs Python in a sandbox when it needs to.",
		"model":       harnesstest.Script(turns...),
		"sandbox":     harnesstest.Sandbox("default", 30, 60, 120),
	})
	harnesstest.AddAgent(t, st, "helper", "", harnesstest.AgentSpec{
		"description": "A plain chat assistant with no sandbox.",
		"model":       harnesstest.Script(map[string]any{"text": "Hello."}),
	})
	// Environments: a Ready one the Tools menu lists, a Building one it must not.
	harnesstest.AddEnvironment(t, st, "analytics", "Ready")
	harnesstest.AddEnvironment(t, st, "gpu", "Building")

	token := signUp(t, st, "alice")

	manager := lifecycle.New(lifecycle.Config{Store: st, Runtimes: harnesstest.Source{C: env.Runtime}})
	srv := api.New(api.Config{
		Store:     st,
		Sandboxes: manager,
		Runtimes:  harnesstest.Source{C: env.Runtime},
		Web:       web.Handler(),
		Runner:    harnesstest.Runners(st, manager),
	})
	ts := serveWeb(t, srv)

	x := newE2E(t, chrome, st, ts, token)
	x.signIn(token)
	x.toolsMenu()
	sid := x.answerTurn()
	x.codeTurn(sid)
	x.download(sid)
	x.screenshots("chat")
	x.cancelTurn(sid)
	x.pastSessions(sid)
	x.signOut()
}

// newE2E starts headless Chromium for a test of the page served by ts (whose store is
// st, whose user signs in with token). Uncaught exceptions and console errors of the
// page fail the test at its end.
func newE2E(t *testing.T, chrome string, st *store.Store, ts *httptest.Server, token string) *e2e {
	t.Helper()
	ctx := context.Background()
	// The browser: headless, its own profile, no sandbox of its own (tests often run as
	// root or in a container without user namespaces; the page it loads is ours).
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 800), chromedp.Flag("lang", "en-US"))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting %s: %v", chrome, err)
	}
	tctx, cancel := context.WithTimeout(bctx, 4*time.Minute)
	t.Cleanup(cancel)

	x := &e2e{t: t, ctx: tctx, st: st, srv: ts, base: ts.URL + "/", token: token, shots: screenshotDir(t), console: make(chan string, 256)}
	// Uncaught exceptions and console errors of the page fail the test at the end
	// (a fetch that got 401 before signing in is expected, and logged as a failed load).
	go func() {
		for m, err := range chromedp.Console(tctx) {
			if err != nil {
				return
			}
			if m.IsException() || (m.Type == chromedp.ConsoleError && !strings.Contains(m.Text, "Failed to load resource")) {
				select {
				case x.console <- m.String():
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		for {
			select {
			case m := <-x.console:
				t.Errorf("the page logged: %s", m)
			default:
				return
			}
		}
	})

	return x
}

// do runs actions, failing the test (with a screenshot) on error.
func (x *e2e) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	x.t.Helper()
	if err := chromedp.Do(x.ctx, actions...); err != nil {
		x.fail(what, err)
	}
}

// fail stops the test with what the page showed.
func (x *e2e) fail(what string, err error) {
	x.t.Helper()
	shot := filepath.Join(x.shots, "failure.png")
	if buf, serr := chromedp.Run(x.ctx, chromedp.CaptureScreenshot()); serr == nil {
		_ = os.WriteFile(shot, buf, 0o644)
	}
	text, _ := chromedp.Run(x.ctx, chromedp.Evaluate[string](`document.body.innerText`))
	var log strings.Builder
	if x.sid != "" {
		evs, _ := x.st.Events(context.Background(), x.sid, 0)
		for _, e := range evs {
			fmt.Fprintf(&log, "  %d %s %.300s\n", e.Seq, e.Kind, e.Payload)
		}
	}
	x.t.Fatalf("%s: %v\nscreenshot: %s\npage text:\n%s\nsession log:\n%s", what, err, shot, text, log.String())
}

// wait polls a JavaScript expression until it is truthy.
func (x *e2e) wait(what, expr string, timeout time.Duration) {
	x.t.Helper()
	_, err := chromedp.Run(x.ctx, chromedp.Poll[bool]("!!("+expr+")",
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	if err != nil {
		x.fail("waiting until "+what, err)
	}
}

// eval evaluates a JavaScript expression into T.
func eval[T any](x *e2e, expr string, opts ...chromedp.EvaluateOption) T {
	x.t.Helper()
	v, err := chromedp.Run(x.ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		x.fail("evaluating "+expr, err)
	}
	return v
}

// enter presses Enter as a keyboard does (a keydown with no character of its own).
var enter = chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
	for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeRawKeyDown, input.DispatchKeyEventTypeKeyUp} {
		if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, input.DispatchKeyEventParams{
			Type: typ, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13,
		}); err != nil {
			return err
		}
	}
	return nil
})

// send types a message and presses Enter.
func (x *e2e) send(text string) {
	x.t.Helper()
	x.do("sending "+text, chromedp.WaitEnabled(chromedp.ID("input")), chromedp.Focus(chromedp.ID("input")),
		chromedp.SendKeys(chromedp.ID("input"), text), enter)
}

// viewport sets the window size and the colour scheme.
func viewport(w, h int64, dark bool) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		scheme := "light"
		if dark {
			scheme = "dark"
		}
		if _, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		}); err != nil {
			return err
		}
		opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
		if w < 600 {
			opts = []chromedp.EmulateViewportOption{chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulatePortrait}
		}
		_, err := chromedp.EmulateViewport(w, h, opts...)(ctx, t)
		return err
	})
}

var desktop = viewport(1280, 800, false)

// clearField empties an input or textarea as a user would (with an input event).
func clearField(id string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(e => { e.value = ''; e.dispatchEvent(new Event('input')); })(document.getElementById(%q))`, id))
}

// shot writes a screenshot of the viewport at w×h to .tmp/screenshots/NAME.png.
func (x *e2e) shot(name string, w, h int64, dark bool) {
	x.t.Helper()
	x.do("resizing for "+name, viewport(w, h, dark), chromedp.Sleep(300*time.Millisecond),
		chromedp.Evaluate[chromedp.Void](`(s => s && (s.scrollTop = s.scrollHeight))(document.getElementById('scroller'))`))
	buf, err := chromedp.Run(x.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		x.fail("screenshot "+name, err)
	}
	p := filepath.Join(x.shots, name+".png")
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		x.t.Fatal(err)
	}
	x.t.Logf("screenshot: %s", p)
}

// screenshots takes the set a person looks at: desktop and phone, light and dark.
func (x *e2e) screenshots(prefix string) {
	x.t.Helper()
	x.shot(prefix+"-desktop", 1280, 800, false)
	x.shot(prefix+"-desktop-dark", 1280, 800, true)
	x.shot(prefix+"-phone", 390, 844, false)
	x.shot(prefix+"-phone-dark", 390, 844, true)
	x.do("back to desktop", desktop)
}

func (x *e2e) signIn(token string) {
	x.t.Helper()
	x.do("opening the page", desktop, chromedp.Navigate(x.base), chromedp.WaitVisible(chromedp.ID("token")))
	x.shot("login-desktop", 1280, 800, false)
	x.shot("login-phone", 390, 844, false)
	// A wrong token is refused with a message, and nothing else happens.
	x.do("a wrong token", desktop, chromedp.SendKeys(chromedp.ID("token"), "tfu_wrong"), chromedp.Click(chromedp.ID("login-submit")))
	x.wait("the wrong token is refused", `!document.getElementById('login-error').hidden`, 10*time.Second)
	x.do("signing in", clearField("token"), chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("login-submit")))
	x.wait("the chat page", `!document.getElementById('shell').hidden && document.getElementById('me-name').textContent === 'alice' &&
		document.querySelectorAll('#agent option').length > 0`, 10*time.Second)
	// The token is gone from the page; the session is a cookie the page cannot read.
	if v := eval[string](x, `document.getElementById('token').value + document.cookie`); v != "" {
		x.t.Errorf("after sign-in the page still holds %q", v)
	}
	if got := eval[[]string](x, `[...document.querySelectorAll('#agent option')].map(o => o.value)`); strings.Join(got, ",") != "analyst,helper" {
		x.t.Errorf("agent menu %v, want analyst and helper", got)
	}
}

// toolsMenu: Tools → Environment lists the Ready environments only, picks one for a new
// chat (a chip shows it) and goes back to the agent's; an agent without a sandbox has
// none to pick.
func (x *e2e) toolsMenu() {
	x.t.Helper()
	x.do("opening Tools", chromedp.Click(chromedp.ID("tools-btn")), chromedp.WaitVisible(chromedp.ID("panel-env")))
	envs := eval[[]string](x, `[...document.querySelectorAll('#panel-env .env-opt')].map(l => l.dataset.env)`)
	if strings.Join(envs, ",") != ",analytics" {
		x.t.Errorf("Environment tab lists %q, want the agent's default and analytics (Ready), not gpu (Building)", envs)
	}
	x.shot("tools-environment-desktop", 1280, 800, false)
	x.do("picking analytics", desktop, chromedp.Click(chromedp.CSS(`label.env-opt[data-env="analytics"]`)))
	x.wait("the environment chip", `document.getElementById('env-chip').textContent.includes('analytics')`, 5*time.Second)
	x.do("back to the agent's environment", chromedp.Click(chromedp.CSS(`#env-chip .chip-x`)))
	x.wait("no environment chip", `document.getElementById('env-chip').hidden`, 5*time.Second)

	// helper has no sandbox: its Environment tab says so and offers nothing.
	x.do("choosing helper", chromedp.SetValue(chromedp.ID("agent"), "helper"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('agent').dispatchEvent(new Event('change'))`),
		chromedp.Click(chromedp.ID("tools-btn")), chromedp.WaitVisible(chromedp.ID("panel-env")))
	if n := eval[int](x, `document.querySelectorAll('#panel-env .env-opt').length`); n != 0 {
		x.t.Errorf("helper (no sandbox) offers %d environments", n)
	}
	if txt := eval[string](x, `document.getElementById('panel-env').textContent`); !strings.Contains(txt, "without a sandbox") {
		x.t.Errorf("helper's Environment tab says %q", txt)
	}
	x.do("back to analyst", chromedp.KeyEvent("\x1b"), chromedp.SetValue(chromedp.ID("agent"), "analyst"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('agent').dispatchEvent(new Event('change'))`))
	x.wait("the Tools menu closed", `document.getElementById('tools-menu').hidden`, 5*time.Second)
}

// answerTurn starts a chat whose first answer streams and needs no sandbox.
func (x *e2e) answerTurn() string {
	x.t.Helper()
	x.send("What is the capital of France?")
	x.wait("the session in the address", `/^#\/s\/./.test(location.hash)`, 15*time.Second)
	x.wait("the answer", `[...document.querySelectorAll('.turn.agent .agent-text')].some(e => e.textContent.includes('capital of France'))`, 20*time.Second)
	x.wait("the turn's end", `!document.getElementById('send').hidden && document.querySelector('.turn-meta')`, 20*time.Second)
	sid := eval[string](x, `decodeURIComponent(location.hash.slice(4))`)
	x.sid = sid
	// It came as a stream of deltas, then the committed text replaced it.
	if !eval[bool](x, `!!document.querySelector('.agent-text[data-streamed] strong')`) {
		x.t.Error("the answer did not stream (no streamed text, or its Markdown was not rendered)")
	}
	if n := eval[int](x, `document.querySelectorAll('.notice.sandbox').length`); n != 0 {
		x.t.Errorf("%d sandbox notices after a turn that ran no code", n)
	}
	// The model's markup stayed text; its https link is a link that opens apart.
	safety := eval[map[string]any](x, `(() => { const t = document.querySelector('.turn.agent .agent-text'); return {
		pwned: !!window.pwned, img: !!t.querySelector('img'), shown: t.textContent.includes('<img src=x onerror='),
		js: !!document.querySelector('.conversation a[href^="javascript"]'),
		link: (a => a ? a.href + ' ' + a.target + ' ' + a.rel : '')(t.querySelector('a')) }; })()`)
	if safety["pwned"] != false || safety["img"] != false || safety["js"] != false || safety["shown"] != true ||
		safety["link"] != "https://en.wikipedia.org/wiki/Paris _blank noopener noreferrer nofollow" {
		x.t.Errorf("the model's markup was not kept as text, or its link is wrong: %v", safety)
	}
	if n := eval[int](x, `document.querySelectorAll('.turn.user').length`); n != 1 {
		x.t.Errorf("%d user messages shown, want 1", n)
	}
	x.assertNoSandbox(sid)
	return sid
}

func (x *e2e) assertNoSandbox(sid string) {
	x.t.Helper()
	evs, err := x.st.Events(context.Background(), sid, 0)
	if err != nil {
		x.t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind == events.KindSandboxProvisioned {
			x.t.Errorf("the answer turn provisioned a sandbox (event %d)", e.Seq)
		}
	}
}

// codeTurn: the sandbox notice appears with the code turn (only there), the steps are
// collapsed with a summary and open to their arguments and result, and the offered file
// has a card.
func (x *e2e) codeTurn(sid string) {
	x.t.Helper()
	x.send("Make me a table of the temperatures.")
	x.wait("the live state", `!document.getElementById('cancel').hidden || document.querySelectorAll('.turn-meta').length >= 2`, 10*time.Second)
	x.wait("the offered file", `document.querySelector('.file-card a.file-download')`, 60*time.Second)
	// The card is drawn again with the verdicts of its download (type, scan), from the
	// files listing.
	x.wait("the file card's verdicts", `[...document.querySelectorAll('.file-card [data-verdict]')].map(b => b.textContent).join(' ') === 'internal text scanner off'`, 10*time.Second)
	x.wait("the turn's end", `!document.getElementById('send').hidden && document.querySelectorAll('.turn-meta').length >= 2`, 30*time.Second)
	perTurn := eval[[]int](x, `[...document.querySelectorAll('.turn.agent')].map(g => g.querySelectorAll('.notice.sandbox').length)`)
	if len(perTurn) != 2 || perTurn[0] != 0 || perTurn[1] != 1 {
		x.t.Errorf("sandbox notices per agent turn %v, want [0 1]: none for the answer, one for the code turn", perTurn)
	}
	steps := eval[[]string](x, `[...document.querySelectorAll('.step')].map(s => s.dataset.tool + ':' + s.className + ':' + s.querySelector('.step-sum').textContent)`)
	want := []string{"write_file:step ok:out/report.csv", "exec:step ok:sha256sum out/report.csv", "offer_artifact:step ok:out/report.csv"}
	if len(steps) != len(want) {
		x.t.Fatalf("steps %q, want %q", steps, want)
	}
	for i := range want {
		if !strings.HasPrefix(steps[i], want[i]) {
			x.t.Errorf("step %d is %q, want it to start %q", i, steps[i], want[i])
		}
	}
	if eval[bool](x, `[...document.querySelectorAll('.step')].some(s => s.open)`) {
		x.t.Error("a tool step is open before it was clicked")
	}
	x.do("opening the exec step", chromedp.Click(chromedp.CSS(`.step[data-tool="exec"] > summary`)))
	body := eval[string](x, `document.querySelector('.step[data-tool="exec"] .step-body').textContent`)
	sum := sha256.Sum256([]byte(report))
	for _, wantText := range []string{"sha256sum out/report.csv", "exit_code: 0", hex.EncodeToString(sum[:])} {
		if !strings.Contains(body, wantText) {
			x.t.Errorf("the opened exec step lacks %q: %q", wantText, body)
		}
	}
	if s := eval[string](x, `document.querySelector('.step[data-tool="exec"] .step-status').textContent`); s != "exit 0" {
		x.t.Errorf("exec step status %q, want exit 0", s)
	}
	card := eval[string](x, `document.querySelector('.file-card').textContent`)
	for _, wantText := range []string{"out/report.csv", fmt.Sprintf("%d B", len(report)), hex.EncodeToString(sum[:])[:12], "expires in", "internal"} {
		if !strings.Contains(card, wantText) {
			x.t.Errorf("the file card lacks %q: %q", wantText, card)
		}
	}
	if got := eval[string](x, `document.querySelector('.file-card .hash').dataset.sha256`); got != hex.EncodeToString(sum[:]) {
		x.t.Errorf("the card's copyable digest is %q", got)
	}
}

// download clicks the card's Download and checks the bytes against the card's digest,
// the server's header and what the sandbox wrote.
func (x *e2e) download(sid string) {
	x.t.Helper()
	dir := x.t.TempDir()
	if _, err := chromedp.CallBrowser(x.ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dir, EventsEnabled: new(true),
	}); err != nil {
		x.fail("allowing downloads", err)
	}
	begin := chromedp.BrowserEvents(x.ctx, browser.DownloadWillBegin)
	progress := chromedp.BrowserEvents(x.ctx, browser.DownloadProgress)
	x.do("clicking Download", chromedp.Click(chromedp.CSS(`.file-card a.file-download`)))
	var guid, name string
	for ev, err := range begin {
		if err != nil {
			x.fail("waiting for the download to begin", err)
		}
		guid, name = ev.GUID, ev.SuggestedFilename
		break
	}
	for ev, err := range progress {
		if err != nil {
			x.fail("waiting for the download", err)
		}
		if ev.GUID != guid {
			continue
		}
		if ev.State == browser.DownloadProgressStateCanceled {
			x.fail("the download", errors.New("the browser cancelled it"))
		}
		if ev.State == browser.DownloadProgressStateCompleted {
			break
		}
	}
	got, err := os.ReadFile(filepath.Join(dir, guid))
	if err != nil {
		x.t.Fatal(err)
	}
	sum := sha256.Sum256(got)
	digest := hex.EncodeToString(sum[:])
	want := sha256.Sum256([]byte(report))
	if string(got) != report || digest != hex.EncodeToString(want[:]) {
		x.t.Errorf("downloaded %q (sha256 %s), want the report the sandbox wrote", got, digest)
	}
	if name != "report.csv" {
		x.t.Errorf("the download is named %q, want report.csv", name)
	}
	if card := eval[string](x, `document.querySelector('.file-card .hash').dataset.sha256`); card != digest {
		x.t.Errorf("the card says sha256 %s, the download is %s", card, digest)
	}
	// The server's digest header agrees (read as a script would, with the token); the
	// link is no use without the page's cookie or a token.
	url := strings.TrimSuffix(x.base, "/") + eval[string](x, `document.querySelector('.file-card a.file-download').getAttribute('href')`)
	for _, bearer := range []string{x.token, ""} {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			x.t.Fatal(err)
		}
		res.Body.Close()
		switch {
		case bearer != "" && (res.StatusCode != http.StatusOK || res.Header.Get("X-Trueforge-SHA256") != digest):
			x.t.Errorf("GET %s with the token: %d, X-Trueforge-SHA256 %q, want 200 and %s", url, res.StatusCode, res.Header.Get("X-Trueforge-SHA256"), digest)
		case bearer == "" && res.StatusCode != http.StatusUnauthorized:
			x.t.Errorf("GET %s with no credentials: %d, want 401", url, res.StatusCode)
		}
	}
	x.t.Logf("downloaded %s (%d bytes, sha256 %s) through the page", name, len(got), digest)
}

// cancelTurn starts a turn running sleep 60 and cancels it from the page.
func (x *e2e) cancelTurn(sid string) {
	x.t.Helper()
	x.send("Run the long job.")
	x.wait("Cancel while the run is live", `!document.getElementById('cancel').hidden && document.getElementById('send').hidden`, 10*time.Second)
	x.wait("the running sleep", `document.querySelector('.step.running[data-tool="exec"]')`, 30*time.Second)
	// Enter does not send while the run is live.
	x.do("typing during the run", chromedp.SendKeys(chromedp.ID("input"), "not yet"), enter)
	if v := eval[string](x, `document.getElementById('input').value`); v != "not yet" {
		x.t.Errorf("Enter during a live run sent or dropped the draft (the box holds %q)", v)
	}
	x.shot("live-desktop", 1280, 800, false)

	// The connection drops mid-turn: the page says it is reconnecting, the browser
	// resumes after the last event it got, and nothing is shown twice.
	before := eval[string](x, `JSON.stringify([document.querySelectorAll('.turn').length, document.querySelectorAll('.step').length, document.querySelectorAll('.agent-body > *').length])`)
	x.srv.CloseClientConnections()
	x.wait("the reconnecting badge", `!document.getElementById('conn').hidden && document.getElementById('conn').textContent.includes('Reconnecting')`, 5*time.Second)
	x.shot("reconnecting-desktop", 1280, 800, false)
	x.wait("the stream back", `document.getElementById('conn').hidden`, 15*time.Second)
	time.Sleep(500 * time.Millisecond)
	if after := eval[string](x, `JSON.stringify([document.querySelectorAll('.turn').length, document.querySelectorAll('.step').length, document.querySelectorAll('.agent-body > *').length])`); after != before {
		x.t.Errorf("after the reconnect the page shows [turns, steps, items] %s, before it %s", after, before)
	}

	started := time.Now()
	x.do("clicking Cancel", chromedp.Click(chromedp.ID("cancel")))
	x.wait("the run's end", `!document.getElementById('send').hidden && document.getElementById('cancel').hidden`, 30*time.Second)
	if d := time.Since(started); d > 20*time.Second {
		x.t.Errorf("the cancel took %s", d)
	}
	x.wait("the cancelled notice", `[...document.querySelectorAll('.notice')].some(n => n.textContent.startsWith('Cancelled'))`, 5*time.Second)
	if eval[bool](x, `!!document.querySelector('.step.running')`) {
		x.t.Error("a step still shows as running after the cancel")
	}
	x.shot("cancelled-desktop", 1280, 800, false)
	x.do("clearing the draft", clearField("input"))

	evs, err := x.st.Events(context.Background(), sid, 0)
	if err != nil {
		x.t.Fatal(err)
	}
	var status string
	for _, e := range evs {
		if p, ok := events.As[events.RunFinished](e.Kind, e.Payload); ok {
			status = p.Status
		}
	}
	if status != store.RunCancelled {
		x.t.Errorf("the last run finished %q, want cancelled", status)
	}
}

// pastSessions: the chat is in the sidebar; after a reload (still signed in by the
// cookie) opening it draws the log again, each event once.
func (x *e2e) pastSessions(sid string) {
	x.t.Helper()
	sel := fmt.Sprintf(`a.session-item[data-id=%q]`, sid)
	x.wait("the chat in the sidebar", `document.querySelector('`+sel+`')`, 10*time.Second)
	x.do("a new chat", chromedp.Click(chromedp.ID("new-chat")))
	x.wait("an empty chat", `!document.getElementById('empty').hidden && document.querySelectorAll('.turn').length === 0`, 5*time.Second)
	x.do("reloading", chromedp.Reload())
	x.wait("still signed in", `!document.getElementById('shell').hidden && document.querySelector('`+sel+`')`, 15*time.Second)
	if txt := eval[string](x, `document.querySelector('`+sel+`').textContent`); !strings.Contains(txt, "analyst") {
		x.t.Errorf("the sidebar item says %q, want the agent", txt)
	}
	x.do("opening the past chat", chromedp.Click(chromedp.CSS(sel)))
	x.wait("its three turns", `document.querySelectorAll('.turn.user').length === 3 && document.querySelectorAll('.turn-meta').length === 3`, 15*time.Second)
	time.Sleep(time.Second) // anything repeated would arrive by now
	evs, err := x.st.Events(context.Background(), sid, 0)
	if err != nil {
		x.t.Fatal(err)
	}
	var calls int
	for _, e := range evs {
		if e.Kind == events.KindToolCall {
			calls++
		}
	}
	counts := eval[map[string]int](x, `({users: document.querySelectorAll('.turn.user').length, steps: document.querySelectorAll('.step').length,
		sandbox: document.querySelectorAll('.notice.sandbox').length, files: document.querySelectorAll('.conversation .file-card').length,
		live: document.getElementById('cancel').hidden ? 0 : 1})`)
	want := map[string]int{"users": 3, "steps": calls, "sandbox": 1, "files": 1, "live": 0}
	if b, _ := json.Marshal(counts); string(b) != string(must(json.Marshal(want))) {
		x.t.Errorf("the reopened chat shows %s, want %s (each event once)", b, must(json.Marshal(want)))
	}
	x.shot("reopened-phone", 390, 844, false)
	x.do("opening the drawer", chromedp.Click(chromedp.ID("open-drawer")), chromedp.Sleep(400*time.Millisecond))
	x.shot("sessions-phone-drawer", 390, 844, false)
	x.do("closing the drawer", chromedp.Click(chromedp.ID("close-drawer")), desktop)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func (x *e2e) signOut() {
	x.t.Helper()
	x.do("signing out", chromedp.Click(chromedp.ID("sign-out")))
	x.wait("the sign-in form", `!document.getElementById('login').hidden`, 10*time.Second)
	x.do("reloading", chromedp.Reload())
	x.wait("the sign-in form after a reload", `!document.getElementById('login').hidden`, 10*time.Second)
}

// kbToken is the bearer token the approvals test's MCP server wants.
const kbToken = "kb-web-CANARY-77d2"

type lookupIn struct {
	Q       string         `json:"q"`
	Filters map[string]any `json:"filters,omitempty"`
}

// TestWebApprovalsEndToEnd: an agent's MCP call that the operator's policy holds for
// the chat's own user ("approvers": ["$caller"]) is a card in the chat, with Approve and
// Deny for that user. Approved, the call is sent once and the answer goes on; denied with
// a note, nothing is sent and the model's tool result says it was not approved. A call
// waiting in another chat shows in the header's badge, which opens that chat.
func TestWebApprovalsEndToEnd(t *testing.T) {
	chrome := findBrowser(t)
	st := harnesstest.NewStore(t)
	harnesstest.SeedNoSandbox(t, st)

	// A real MCP server on loopback (go-sdk, streamable HTTP) that counts its calls.
	var calls atomic.Int64
	t.Setenv("TF_TEST_WEB_KB_TOKEN", kbToken)
	mcpSrv := mcp.NewServer(&mcp.Implementation{Name: "kb", Version: "1"}, nil)
	mcp.AddTool(mcpSrv, &mcp.Tool{Name: "lookup", Description: "Look something up in the knowledge base."},
		func(ctx context.Context, req *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, any, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answer for " + in.Q}}}, nil, nil
		})
	mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpSrv }, nil)
	kb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+kbToken {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mh.ServeHTTP(w, r)
	}))
	t.Cleanup(kb.Close)

	lookup := map[string]any{"name": "kb__lookup", "arguments": map[string]any{
		"q": "trueforge <b>release</b> notes", "filters": map[string]any{"year": 2026, "tags": []string{"harness", "web"}}}}
	kbServer := []any{map[string]any{"name": "kb", "url": kb.URL, "credential_env": "TF_TEST_WEB_KB_TOKEN"}}
	harnesstest.AddAgent(t, st, "librarian", "default", harnesstest.AgentSpec{
		"description": "Looks things up in the knowledge base.",
		"model": harnesstest.Script(
			map[string]any{"text": "I will look that up.", "tool_calls": []any{lookup}},
			map[string]any{"text": "The knowledge base has the release notes you asked for."}),
		"mcp_servers": kbServer,
	})
	harnesstest.AddAgent(t, st, "archivist", "default", harnesstest.AgentSpec{
		"description": "Also looks things up.",
		"model": harnesstest.Script(
			map[string]any{"tool_calls": []any{lookup}},
			map[string]any{"text": "The lookup was not approved, so I have no answer."}),
		"mcp_servers": kbServer,
	})

	// The operator's policy: every lookup waits for the chat's own user.
	polPath := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(polPath, []byte(`{"rules": [
	  {"effect": "approve", "servers": ["`+kb.URL+`"], "tools": ["lookup"], "approvers": ["$caller"],
	   "timeout": "5m", "reason": "Lookups in the knowledge base need a person's approval"}
	], "default": "allow"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Load(polPath)
	if err != nil {
		t.Fatal(err)
	}
	// Each message's runner, wired as the harness's runnerFor wires it: the policy, the
	// approval gate and the budgets' meter.
	runnerFor := func(ctx context.Context, agent, user string) (*runner.Runner, error) {
		a, err := agents.Load(ctx, st, agent)
		if err != nil {
			return nil, err
		}
		auth := a.Authority(nil, harnesstest.Owner)
		m, err := a.NewModel(agents.ModelOptions{Credentials: auth})
		if err != nil {
			return nil, err
		}
		meter := &budgets.Meter{Store: st, Policy: pol}
		ts := mcptools.New(a.Spec.MCPServers, mcptools.Options{User: user, Agent: a.Name, Owner: a.Owner, Credentials: auth,
			Policy: pol, Approver: &approvals.Gate{Store: st, Poll: 50 * time.Millisecond}, Budgets: meter})
		t.Cleanup(ts.Close)
		return &runner.Runner{Store: st, Agent: a, Model: m, Tools: &tools.Executor{Store: st, MCP: ts}, Budgets: meter}, nil
	}

	token := signUp(t, st, "alice")
	srv := api.New(api.Config{Store: st, Web: web.Handler(), Runner: runnerFor})
	ts := serveWeb(t, srv)

	x := newE2E(t, chrome, st, ts, token)
	x.enter(token, `!document.getElementById('shell').hidden && document.querySelectorAll('#agent option').length === 2`)

	// Approved: the card, its buttons, then the call made once and the answer.
	x.pickAgent("librarian")
	x.send("Find the release notes.")
	x.wait("the session in the address", `/^#\/s\/./.test(location.hash)`, 15*time.Second)
	x.sid = eval[string](x, `decodeURIComponent(location.hash.slice(4))`)
	x.wait("the approval card with its buttons", `document.querySelector('.approval-card[data-state="pending"] button.ap-approve')`, 20*time.Second)
	card := eval[map[string]string](x, `(c => ({text: c.textContent, args: c.querySelector('pre.ap-args').textContent,
		left: c.querySelector('.ap-countdown').textContent, label: c.querySelector('.ap-approve').getAttribute('aria-label')}))(document.querySelector('.approval-card'))`)
	for _, want := range []string{"lookup", kb.URL, "Lookups in the knowledge base need a person's approval", "May approve: you", "rule 0"} {
		if !strings.Contains(card["text"], want) {
			t.Errorf("the approval card lacks %q: %q", want, card["text"])
		}
	}
	if !strings.Contains(card["args"], "\"q\": \"trueforge <b>release</b> notes\"") || !strings.Contains(card["args"], "\n    \"year\": 2026") {
		t.Errorf("the card's arguments are not the call's, pretty-printed: %q", card["args"])
	}
	if !strings.HasPrefix(card["left"], "Decide within 4:") && !strings.HasPrefix(card["left"], "Decide within 5:") {
		t.Errorf("the countdown says %q, want about 5 minutes", card["left"])
	}
	if card["label"] != "Approve lookup" {
		t.Errorf("the Approve button's label is %q", card["label"])
	}
	if eval[bool](x, `!!document.querySelector('.approval-card b')`) {
		t.Error("markup in the call's arguments became markup on the page")
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the MCP server received %d calls before the approval", n)
	}
	x.approvalShots("approval-pending")
	// The code of a "code" approval is highlighted with spans of text, never markup.
	hl := eval[string](x, `import('/hl.js').then(m => { const c = m.highlight('# <img src=x onerror=alert(1)>\nif x == 42:\n    print("hi")', 'python');
		return [...c.childNodes].map(n => n.nodeType === 3 ? n.textContent : n.className + ':' + n.textContent).join('|') + '|' + c.querySelectorAll('img').length; })`,
		chromedp.EvalAwaitPromise)
	if want := "tok-com:# <img src=x onerror=alert(1)>|\n|tok-kw:if| x == |tok-num:42|:\n    |tok-kw:print|(|tok-str:\"hi\"|)|0"; hl != want {
		t.Errorf("highlighting Python gave %q, want %q", hl, want)
	}
	// The keyboard reaches Approve: focus it and press Enter.
	x.do("approving with the keyboard", chromedp.Focus(chromedp.CSS(`.approval-card .ap-approve`)), chromedp.KeyEvent("\r"))
	x.wait("the approved card", `document.querySelector('.approval-card[data-state="approved"]') && !document.querySelector('.approval-card button')`, 10*time.Second)
	x.wait("the tool result and the final answer", `document.querySelector('.step.ok[data-tool="kb__lookup"]') &&
		[...document.querySelectorAll('.agent-text')].some(e => e.textContent.includes('has the release notes'))`, 20*time.Second)
	x.wait("the turn's end", `!document.getElementById('send').hidden && document.querySelector('.turn-meta')`, 20*time.Second)
	if n := calls.Load(); n != 1 {
		t.Errorf("the MCP server received %d calls; want exactly 1", n)
	}
	x.do("opening the lookup step", chromedp.Click(chromedp.CSS(`.step[data-tool="kb__lookup"] > summary`)))
	if body := eval[string](x, `document.querySelector('.step[data-tool="kb__lookup"] .step-body').textContent`); !strings.Contains(body, "answer for trueforge <b>release</b> notes") {
		t.Errorf("the lookup step shows %q, want the server's answer", body)
	}
	if out := eval[string](x, `document.querySelector('.approval-card .ap-outcome').textContent`); !strings.Contains(out, "Approved by alice") {
		t.Errorf("the decided card says %q", out)
	}
	x.shot("approval-approved-desktop", 1280, 800, false)
	approvedSID := x.sid

	// Denied, reached through the badge: a call waits in a second chat while the page
	// shows another; the badge counts it and opens that chat.
	x.do("a new chat", chromedp.Click(chromedp.ID("new-chat")))
	x.pickAgent("archivist")
	x.send("Find the release notes again.")
	x.wait("the second session", `/^#\/s\/./.test(location.hash) && decodeURIComponent(location.hash.slice(4)) !== `+jsString(approvedSID), 15*time.Second)
	x.sid = eval[string](x, `decodeURIComponent(location.hash.slice(4))`)
	x.wait("its approval card", `document.querySelector('.approval-card[data-state="pending"] button.ap-deny')`, 20*time.Second)
	if !eval[bool](x, `document.getElementById('approvals-btn').hidden`) {
		t.Error("the badge counts the approval of the open chat")
	}
	x.do("opening the first chat", chromedp.Click(chromedp.CSS(`a.session-item[data-id=`+jsString(approvedSID)+`]`)))
	x.wait("the badge", `!document.getElementById('approvals-btn').hidden && document.getElementById('approvals-count').textContent === '1'`, 15*time.Second)
	// The first chat, reopened, draws its card decided from the log.
	x.wait("the first chat's decided card", `document.querySelector('.approval-card[data-state="approved"]') && !document.querySelector('.approval-card button')`, 10*time.Second)
	x.do("opening the badge", chromedp.Click(chromedp.ID("approvals-btn")))
	x.wait("the list of waiting approvals", `document.querySelectorAll('#approvals-panel a.ap-item').length === 1`, 5*time.Second)
	x.shot("approval-badge-desktop", 1280, 800, false)
	x.shot("approval-badge-phone", 390, 844, false)
	x.do("back to desktop", desktop)
	x.do("opening the waiting chat", chromedp.Click(chromedp.CSS(`#approvals-panel a.ap-item`)))
	x.wait("the waiting chat", `decodeURIComponent(location.hash.slice(4)) === `+jsString(x.sid)+` && document.querySelector('.approval-card[data-state="pending"] button.ap-deny')`, 10*time.Second)
	x.do("denying with a note", chromedp.SendKeys(chromedp.CSS(`.approval-card input.ap-note`), "Not the release notes, please"),
		chromedp.Click(chromedp.CSS(`.approval-card .ap-deny`)))
	x.wait("the denied card", `document.querySelector('.approval-card[data-state="denied"]') && !document.querySelector('.approval-card button')`, 10*time.Second)
	x.wait("the refused step and the answer", `document.querySelector('.step.error[data-tool="kb__lookup"]') &&
		[...document.querySelectorAll('.agent-text')].some(e => e.textContent.includes('was not approved'))`, 20*time.Second)
	if out := eval[string](x, `document.querySelector('.approval-card .ap-outcome').textContent`); !strings.Contains(out, "Denied by alice") || !strings.Contains(out, "Not the release notes, please") {
		t.Errorf("the denied card says %q, want who denied it and the note", out)
	}
	x.do("opening the refused step", chromedp.Click(chromedp.CSS(`.step[data-tool="kb__lookup"] > summary`)))
	body := eval[string](x, `document.querySelector('.step[data-tool="kb__lookup"] .step-body').textContent`)
	for _, want := range []string{"not approved", "denied by alice", "Not the release notes, please"} {
		if !strings.Contains(body, want) {
			t.Errorf("the model's tool result lacks %q: %q", want, body)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the MCP server received %d calls after the denial; want still 1", n)
	}
	x.wait("no badge", `document.getElementById('approvals-btn').hidden`, 15*time.Second)
	x.shot("approval-denied-phone", 390, 844, false)
	x.do("back to desktop", desktop)
}

// pickAgent chooses the agent of a new chat.
func (x *e2e) pickAgent(name string) {
	x.t.Helper()
	x.do("choosing "+name, chromedp.SetValue(chromedp.ID("agent"), name),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('agent').dispatchEvent(new Event('change'))`))
}

// approvalShots takes the pending card at 1280×800 and 390×844 (light and dark), the
// card scrolled into view.
func (x *e2e) approvalShots(prefix string) {
	x.t.Helper()
	for _, s := range []struct {
		name string
		w, h int64
		dark bool
	}{{"-desktop", 1280, 800, false}, {"-desktop-dark", 1280, 800, true}, {"-phone", 390, 844, false}, {"-phone-dark", 390, 844, true}} {
		x.do("resizing for "+prefix+s.name, viewport(s.w, s.h, s.dark), chromedp.Sleep(300*time.Millisecond),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('.approval-card').scrollIntoView({block: 'center'})`))
		buf, err := chromedp.Run(x.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			x.fail("screenshot "+prefix+s.name, err)
		}
		p := filepath.Join(x.shots, prefix+s.name+".png")
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			x.t.Fatal(err)
		}
		x.t.Logf("screenshot: %s", p)
	}
	x.do("back to desktop", desktop)
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	return string(must(json.Marshal(s)))
}

// TestWebQuestionsEndToEnd: an MCP server's question during a call (elicitation/create)
// is a question card in the chat with a form built from the server's schema; the
// chat's user answers it (a value the schema refuses first: the server's message shows
// beside the form, which keeps what was typed), the server gets the answer typed as its
// schema says, and the chat goes on; a second question is declined. The call's progress
// shows as one line under its step, the latest report only.
func TestWebQuestionsEndToEnd(t *testing.T) {
	chrome := findBrowser(t)
	st := harnesstest.NewStore(t)
	harnesstest.SeedNoSandbox(t, st)

	// A real MCP server on loopback (go-sdk, streamable HTTP) whose "release" tool
	// reports progress, asks its client a question and returns what it was told.
	got := make(chan string, 4)
	t.Setenv("TF_TEST_WEB_KB_TOKEN", kbToken)
	mcpSrv := mcp.NewServer(&mcp.Implementation{Name: "kb", Version: "1"}, nil)
	mcp.AddTool(mcpSrv, &mcp.Tool{Name: "release", Description: "Prepares a release, asking how."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			tok := req.Params.GetProgressToken()
			progress := func(i float64, msg string) {
				if tok != nil {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: i, Total: 3, Message: msg})
				}
				time.Sleep(300 * time.Millisecond)
			}
			progress(1, "checking the branch")
			progress(2, "waiting for your answer")
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
				Message: "Which release should I tag?\nThe build is <b>ready</b> <img src=x onerror=\"window.pwned=1\">",
				RequestedSchema: map[string]any{
					"type": "object",
					"properties": map[string]any{
						"name":     map[string]any{"type": "string", "title": "Release name", "description": "The tag to create, e.g. v2.4"},
						"replicas": map[string]any{"type": "integer", "title": "Replicas", "minimum": 1, "maximum": 5, "default": 2},
						"notify":   map[string]any{"type": "boolean", "title": "Notify the team", "default": true},
						"channel": map[string]any{"type": "string", "title": "Channel", "enum": []any{"stable", "beta", "nightly"},
							"enumNames": []any{"Stable", "Beta", "Nightly"}, "default": "stable"},
						"regions": map[string]any{"type": "array", "title": "Regions", "minItems": 1, "maxItems": 2,
							"items": map[string]any{"anyOf": []any{
								map[string]any{"const": "eu", "title": "Europe"},
								map[string]any{"const": "us", "title": "United States"},
								map[string]any{"const": "ap", "title": "Asia Pacific"}}}},
					},
					"required": []any{"name"},
				}})
			if err != nil {
				got <- "error: " + err.Error()
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil, nil //nolint:nilerr // the tool reports it
			}
			answer := res.Action
			if res.Action == "accept" {
				answer += " " + string(must(json.Marshal(res.Content)))
			}
			got <- answer
			progress(3, "tagged")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the user said: " + answer}}}, nil, nil
		})
	mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpSrv }, nil)
	kb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+kbToken {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mh.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		kb.CloseClientConnections() // a tool still waiting for an answer (a failed test) ends
		kb.Close()
	})

	release := map[string]any{"name": "kb__release", "arguments": map[string]any{}}
	harnesstest.AddAgent(t, st, "releaser", "default", harnesstest.AgentSpec{
		"description": "Prepares releases.",
		"model": harnesstest.Script(
			map[string]any{"text": "I will prepare the release.", "tool_calls": []any{release}},
			map[string]any{"text": "The release is tagged as you said."},
			map[string]any{"tool_calls": []any{release}},
			map[string]any{"text": "You declined, so nothing was tagged."}),
		"mcp_servers": []any{map[string]any{"name": "kb", "url": kb.URL, "credential_env": "TF_TEST_WEB_KB_TOKEN"}},
	})
	// Each message's runner, wired as the harness's runnerFor wires it: the approvals
	// gate both holds calls (Approver) and puts servers' questions to the user (Asker).
	runnerFor := func(ctx context.Context, agent, user string) (*runner.Runner, error) {
		a, err := agents.Load(ctx, st, agent)
		if err != nil {
			return nil, err
		}
		auth := a.Authority(nil, harnesstest.Owner)
		m, err := a.NewModel(agents.ModelOptions{Credentials: auth})
		if err != nil {
			return nil, err
		}
		gate := &approvals.Gate{Store: st, Poll: 50 * time.Millisecond}
		ts := mcptools.New(a.Spec.MCPServers, mcptools.Options{User: user, Agent: a.Name, Owner: a.Owner, Credentials: auth,
			Approver: gate, Asker: gate})
		t.Cleanup(ts.Close)
		return &runner.Runner{Store: st, Agent: a, Model: m, Tools: &tools.Executor{Store: st, MCP: ts}}, nil
	}

	token := signUp(t, st, "alice")
	srv := api.New(api.Config{Store: st, Web: web.Handler(), Runner: runnerFor})
	ts := serveWeb(t, srv)

	x := newE2E(t, chrome, st, ts, token)
	x.enter(token, `!document.getElementById('shell').hidden && document.querySelectorAll('#agent option').length === 1`)

	x.pickAgent("releaser")
	x.send("Tag the release.")
	x.wait("the session in the address", `/^#\/s\/./.test(location.hash)`, 15*time.Second)
	x.sid = eval[string](x, `decodeURIComponent(location.hash.slice(4))`)
	const card = `.approval-card.ask-card[data-state="pending"]`
	x.wait("the question's form", `document.querySelector('`+card+` form.ask-form')`, 20*time.Second)

	// The call's progress: one line under the step, the latest report.
	x.wait("the progress line at 2 of 3", `(p => p && p.querySelector('.sp-count').textContent === '2 / 3' && p.querySelector('progress').value === 2)(document.querySelector('.step[data-tool="kb__release"] ~ .step-progress'))`, 10*time.Second)
	prog := eval[map[string]any](x, `({n: document.querySelectorAll('.step-progress').length, text: document.querySelector('.step-progress .sp-text').textContent})`)
	if prog["n"] != float64(1) || prog["text"] != "waiting for your answer" {
		t.Errorf("the progress shows %v, want one line with the latest report", prog)
	}
	x.cardShots("question-progress", `.step[data-tool="kb__release"]`, "start")

	// The card: the question as text, the form as the schema says.
	form := eval[map[string]any](x, `(c => ({
		text: c.textContent, question: c.querySelector('.ask-question').innerText,
		markup: c.querySelectorAll('.ask-question b, .ask-question img').length,
		labels: [...c.querySelectorAll('.ask-label')].map(l => l.textContent),
		help: c.querySelector('[data-field="name"] .ask-help').textContent,
		nameRequired: c.querySelector('[data-field="name"] input').getAttribute('aria-required'),
		replicas: [c.querySelector('[data-field="replicas"] input').value, c.querySelector('[data-field="replicas"] input').min, c.querySelector('[data-field="replicas"] input').max, c.querySelector('[data-field="replicas"] input').type],
		notify: c.querySelector('[data-field="notify"] input').checked,
		channel: c.querySelector('[data-field="channel"] select').selectedOptions[0].textContent,
		channels: [...c.querySelectorAll('[data-field="channel"] option')].map(o => o.textContent),
		regions: [...c.querySelectorAll('[data-field="regions"] .ask-opt')].map(o => o.textContent + (o.querySelector('input').checked ? '+' : '')),
		left: c.querySelector('.ap-countdown').textContent,
	}))(document.querySelector('`+card+`'))`)
	for _, want := range []string{"MCP server kb asks:", kb.URL} {
		if !strings.Contains(form["text"].(string), want) {
			t.Errorf("the question card lacks %q: %q", want, form["text"])
		}
	}
	if q := form["question"]; q != "Which release should I tag?\nThe build is <b>ready</b> <img src=x onerror=\"window.pwned=1\">" || form["markup"] != float64(0) {
		t.Errorf("the question shows %q (%v elements of markup), want the server's text as text", q, form["markup"])
	}
	wantForm := map[string]any{
		// In the order of the schema's properties as the harness passes them on (its
		// MCP client reads the schema into a map: alphabetical).
		"labels":       []any{"Channel", "Release name * (required)", "Notify the team", "Regions", "Replicas (a whole number, 1 to 5)"},
		"help":         "The tag to create, e.g. v2.4",
		"nameRequired": "true",
		"replicas":     []any{"2", "1", "5", "number"},
		"notify":       true,
		"channel":      "Stable",
		"channels":     []any{"(no answer)", "Stable", "Beta", "Nightly"},
		"regions":      []any{"Europe", "United States", "Asia Pacific"},
	}
	for k, want := range wantForm {
		if g, w := string(must(json.Marshal(form[k]))), string(must(json.Marshal(want))); g != w {
			t.Errorf("the form's %s is %s, want %s", k, g, w)
		}
	}
	if left := form["left"].(string); !strings.HasPrefix(left, "Answer within 9:") && !strings.HasPrefix(left, "Answer within 10:") {
		t.Errorf("the countdown says %q, want about 10 minutes (approvals.ElicitTimeout)", left)
	}

	// Filled in with a number of replicas over the maximum: the server refuses it and
	// says why, beside the form, which keeps what was typed.
	f := func(field, sel string) chromedp.CSS {
		return chromedp.CSS(card + ` [data-field="` + field + `"] ` + sel)
	}
	x.do("filling in the form",
		chromedp.SendKeys(f("name", "input"), "v2.4 <b>rc</b>"),
		chromedp.Evaluate[chromedp.Void](`(e => { e.select(); })(document.querySelector('`+card+` [data-field="replicas"] input'))`),
		chromedp.SendKeys(f("replicas", "input"), "9"),
		chromedp.Click(f("notify", "input")),
		chromedp.SetValue(f("channel", "select"), "1"),
		chromedp.Click(f("regions", `input[id$="-0"]`)),
		chromedp.Click(f("regions", `input[id$="-2"]`)))
	x.do("submitting", chromedp.Click(chromedp.CSS(card+` .ask-submit`)))
	x.wait("the server's refusal beside the form", `(e => e && !e.hidden && e.textContent)(document.querySelector('.ask-card .ask-error'))`, 10*time.Second)
	refusal := eval[map[string]any](x, `(c => ({error: c.querySelector('.ask-error').textContent, name: c.querySelector('[data-field="name"] input').value,
		replicas: c.querySelector('[data-field="replicas"] input').value, bad: c.querySelector('[data-field="replicas"]').classList.contains('bad'),
		enabled: !c.querySelector('.ask-submit').disabled}))(document.querySelector('`+card+`'))`)
	if e := refusal["error"].(string); e != "Replicas: maximum: 9 is greater than 5" {
		t.Errorf("the refusal says %q, want the server's message about replicas", e)
	}
	if refusal["name"] != "v2.4 <b>rc</b>" || refusal["replicas"] != "9" || refusal["bad"] != true || refusal["enabled"] != true {
		t.Errorf("after the refusal the form is %v, want what was typed, replicas marked, Submit enabled", refusal)
	}
	select {
	case a := <-got:
		t.Fatalf("the server got %q before a valid answer", a)
	default:
	}
	x.cardShots("question", `.ask-card`, "start")

	// Corrected and submitted: the server gets the answer typed as its schema says.
	x.do("correcting replicas", chromedp.Evaluate[chromedp.Void](`(e => { e.select(); })(document.querySelector('`+card+` [data-field="replicas"] input'))`),
		chromedp.SendKeys(f("replicas", "input"), "3"), chromedp.Focus(f("name", "input")), chromedp.KeyEvent("\r"))
	select {
	case a := <-got:
		if want := `accept {"channel":"beta","name":"v2.4 \u003cb\u003erc\u003c/b\u003e","notify":false,"regions":["eu","ap"],"replicas":3}`; a != want {
			t.Errorf("the server got %s\nwant %s", a, want)
		}
	case <-time.After(20 * time.Second):
		x.fail("waiting for the server's answer", errors.New("none came"))
	}
	x.wait("the answered card", `document.querySelector('.ask-card[data-state="approved"] .ask-values') && !document.querySelector('.ask-card button')`, 10*time.Second)
	x.wait("the tool result and the answer", `document.querySelector('.step.ok[data-tool="kb__release"]') && !document.querySelector('.step-progress') &&
		[...document.querySelectorAll('.agent-text')].some(e => e.textContent.includes('tagged as you said'))`, 20*time.Second)
	x.wait("the turn's end", `!document.getElementById('send').hidden && document.querySelector('.turn-meta')`, 20*time.Second)
	answered := eval[map[string]any](x, `(c => ({outcome: c.querySelector('.ap-outcome-text').textContent,
		values: [...c.querySelectorAll('.ask-values dt')].map(dt => dt.textContent + ': ' + dt.nextElementSibling.textContent)}))(document.querySelector('.ask-card'))`)
	if !strings.HasPrefix(answered["outcome"].(string), "Answered by alice") {
		t.Errorf("the answered card says %q", answered["outcome"])
	}
	if g, w := string(must(json.Marshal(answered["values"]))), `["Channel: Beta","Release name: v2.4 \u003cb\u003erc\u003c/b\u003e","Notify the team: No","Regions: Europe, Asia Pacific","Replicas: 3"]`; g != w {
		t.Errorf("the answered card shows %s, want %s", g, w)
	}
	x.shot("question-answered-desktop", 1280, 800, false)

	// A second question, declined.
	x.send("Tag another one.")
	x.wait("the second question", `document.querySelectorAll('.ask-card').length === 2 && document.querySelector('`+card+` .ask-decline')`, 20*time.Second)
	x.do("declining", chromedp.Click(chromedp.CSS(card+` .ask-decline`)))
	select {
	case a := <-got:
		if a != "decline" {
			t.Errorf("the server got %q, want decline", a)
		}
	case <-time.After(20 * time.Second):
		x.fail("waiting for the server's decline", errors.New("none came"))
	}
	x.wait("the declined card and the answer", `document.querySelector('.ask-card[data-state="denied"]') &&
		[...document.querySelectorAll('.agent-text')].some(e => e.textContent.includes('You declined'))`, 20*time.Second)
	if out := eval[string](x, `document.querySelectorAll('.ask-card')[1].querySelector('.ap-outcome').textContent`); !strings.HasPrefix(out, "Declined by alice") {
		t.Errorf("the declined card says %q", out)
	}

	// Reopened, the chat draws both cards decided from the log, each once.
	x.do("reloading", chromedp.Reload())
	x.wait("the reopened chat", `document.querySelectorAll('.ask-card').length === 2 && document.querySelector('.ask-card[data-state="approved"] .ask-values dd') &&
		document.querySelector('.ask-card[data-state="denied"]')`, 15*time.Second)
	if n := eval[int](x, `document.querySelectorAll('.approval-card').length`); n != 2 {
		t.Errorf("the reopened chat shows %d cards, want 2", n)
	}
	x.shot("question-declined-phone", 390, 844, false)
	x.do("back to desktop", desktop)
}

// cardShots takes the first element matching sel at 1280×800 and 390×844 (light and
// dark), scrolled into view (block: "start", "center" or "end").
func (x *e2e) cardShots(prefix, sel, block string) {
	x.t.Helper()
	for _, s := range []struct {
		name string
		w, h int64
		dark bool
	}{{"-desktop", 1280, 800, false}, {"-desktop-dark", 1280, 800, true}, {"-phone", 390, 844, false}, {"-phone-dark", 390, 844, true}} {
		x.do("resizing for "+prefix+s.name, viewport(s.w, s.h, s.dark), chromedp.Sleep(300*time.Millisecond),
			chromedp.Evaluate[chromedp.Void](`document.querySelector(`+jsString(sel)+`).scrollIntoView({block: `+jsString(block)+`})`))
		buf, err := chromedp.Run(x.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			x.fail("screenshot "+prefix+s.name, err)
		}
		p := filepath.Join(x.shots, prefix+s.name+".png")
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			x.t.Fatal(err)
		}
		x.t.Logf("screenshot: %s", p)
	}
	x.do("back to desktop", desktop)
}
