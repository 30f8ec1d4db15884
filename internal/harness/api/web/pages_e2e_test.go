package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api/web"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// pagesCanary is the stored value of every secret in this test: it must appear nowhere
// in the page.
const pagesCanary = "CANARY-web-secret-7d1c"

// seedPages stores the reserved default environment (Ready), alice's "alices" (Ready,
// two CPUs, an allow list, a secret, a variable, a warm pool of 2 with one member
// ready), bob's unshared "bobs", a scripted agent without a sandbox, and a session of
// bob's that spent 9999 input tokens.
func seedPages(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.CreateSandboxProvider(ctx, store.SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: harnesstest.Owner}))
	snap := func(id string) {
		_, _, err := st.ClaimSnapshot(ctx, store.Snapshot{ID: id, Provider: "local", BuildHash: "h-" + id, Spec: "{}"}, sandbox.StatusBuilding, sandbox.StatusFailed)
		must(err)
		must(st.SetSnapshotState(ctx, id, sandbox.StatusReady, "", ""))
	}
	snap("snap-default")
	snap("snap-alices")
	must(st.CreateEnvironment(ctx, store.Environment{ID: "e-default", Name: "default", Provider: "local", Owner: harnesstest.Owner, Reserved: true,
		Image: sandbox.PlatformImage, CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h-snap-default", SnapshotID: "snap-default"}))
	must(st.CreateEnvironment(ctx, store.Environment{ID: "e-alices", Name: "alices", Provider: "local", Owner: "alice", Image: sandbox.PlatformImage,
		CPU: 2, MemoryGB: 4, DiskGB: 10, BuildHash: "h-snap-alices", SnapshotID: "snap-alices", Env: map[string]string{"LOG_LEVEL": "debug"},
		AllowDomains: []string{"api.github.com"}, Settings: store.EnvironmentSettings{WarmPool: &store.WarmPool{Size: 2, MaxAgeSeconds: 900}}}))
	must(st.CreateSecret(ctx, store.Secret{ID: store.SecretID("alices", "GH_TOKEN"), Environment: "alices", EnvName: "GH_TOKEN",
		Hosts: []string{"api.github.com"}, ValueEnc: []byte(pagesCanary)}))
	must(st.PutPoolSandbox(ctx, store.PoolSandbox{SandboxID: "pool-1", Environment: "alices", Provider: "local", SnapshotID: "snap-alices",
		State: store.PoolReady, CreatedAt: time.Now()}))
	must(st.CreateEnvironment(ctx, store.Environment{ID: "e-bobs", Name: "bobs", Provider: "local", Owner: "bob", Image: sandbox.PlatformImage,
		CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h-snap-alices", SnapshotID: "snap-alices"}))
	must(st.CreateSecret(ctx, store.Secret{ID: store.SecretID("bobs", "BOB_KEY"), Environment: "bobs", EnvName: "BOB_KEY", ValueEnc: []byte(pagesCanary)}))
	harnesstest.AddAgent(t, st, "helper", "", harnesstest.AgentSpec{
		"description": "A plain chat assistant with no sandbox.",
		"model":       harnesstest.Script(map[string]any{"text": "Hello.", "usage": map[string]any{"input_tokens": 321, "output_tokens": 12}}),
	})
	must(st.CreateSession(ctx, store.Session{ID: "bobs-session", Agent: "helper", Owner: "bob"}))
	if _, err := st.AppendEvent(ctx, "bobs-session", "r", "usage", []byte(`{"step":{"input_tokens":9999,"output_tokens":1}}`)); err != nil {
		t.Fatal(err)
	}
}

// The Environments page and the Usage view in Chromium: alice sees the reserved default
// and her own environment (status, resources, networking, secret names, variables,
// versions, warm pool), not bob's, and no secret value anywhere in the page; her usage
// shows the turn she just had and none of bob's.
func TestWebEnvironmentsAndUsageEndToEnd(t *testing.T) {
	chrome := findBrowser(t)
	st := harnesstest.NewStore(t)
	seedPages(t, st)
	token := signUp(t, st, "alice")
	srv := api.New(api.Config{Store: st, Web: web.Handler(), Runner: harnesstest.Runners(st, nil)})
	ts := serveWeb(t, srv)

	x := newE2E(t, chrome, st, ts, token)
	x.enter(token, `!document.getElementById('shell').hidden && document.querySelectorAll('#agent option').length > 0`)
	x.send("hi")
	x.wait("the answer", `document.getElementById('conversation').innerText.includes('Hello.') && !document.getElementById('cancel').checkVisibility()`, 30*time.Second)

	// Envs in the sidebar opens the Environments page.
	x.do("opening Envs", chromedp.Click(chromedp.ID("nav-envs")))
	x.wait("the environment cards", `document.querySelectorAll('.env-card').length === 2 && document.getElementById('chat-view').hidden`, 10*time.Second)
	if got := eval[[]string](x, `[...document.querySelectorAll('.env-card')].map(c => c.dataset.env)`); strings.Join(got, ",") != "default,alices" {
		t.Errorf("environment cards %v, want default and alices (not bob's)", got)
	}
	card := eval[string](x, `document.querySelector('.env-card[data-env="alices"]').innerText`)
	for _, want := range []string{"Ready", "2 CPU · 4 GB memory · 10 GB disk", "Allow list: api.github.com", "GH_TOKEN", "LOG_LEVEL",
		"1 of 2 ready", "current", "Last updated"} {
		if !strings.Contains(card, want) {
			t.Errorf("alice's environment card lacks %q:\n%s", want, card)
		}
	}
	if def := eval[string](x, `document.querySelector('.env-card[data-env="default"]').innerText`); !strings.Contains(def, "reserved") ||
		!strings.Contains(def, "1 CPU · 1 GB memory · 3 GB disk") || !strings.Contains(def, "Unrestricted egress") {
		t.Errorf("the default environment's card:\n%s", def)
	}
	x.noCanary("the Environments page")
	x.screenshots("environments")

	// Usage in the sidebar: her own turn's tokens, none of bob's.
	x.do("opening Usage", chromedp.Click(chromedp.ID("nav-usage")))
	x.wait("the usage tables", `document.querySelector('#usage-tokens table') !== null`, 10*time.Second)
	tokens := eval[string](x, `document.getElementById('usage-tokens').innerText`)
	if !strings.Contains(tokens, "helper") || !strings.Contains(tokens, "321") || !strings.Contains(tokens, "12") {
		t.Errorf("alice's tokens:\n%s", tokens)
	}
	if page := eval[string](x, `document.getElementById('page').innerText`); strings.Contains(page, "9999") {
		t.Errorf("alice's usage shows bob's tokens:\n%s", page)
	}
	x.do("a 24-hour window", chromedp.SetValue(chromedp.ID("usage-window"), "1d"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('usage-window').dispatchEvent(new Event('change'))`))
	x.wait("the 24-hour window", `document.getElementById('usage-window').value === '1d' && document.querySelector('#usage-tokens table') !== null`, 10*time.Second)
	x.noCanary("the Usage page")
	x.screenshots("usage")

	// New chat goes back to the chat.
	x.do("back to the chat", chromedp.Click(chromedp.ID("new-chat")))
	x.wait("the chat view", `!document.getElementById('chat-view').hidden && document.getElementById('page-view').hidden`, 10*time.Second)
}

// noCanary fails when a secret's value is anywhere in the page's markup or text.
func (x *e2e) noCanary(where string) {
	x.t.Helper()
	if html := eval[string](x, `document.documentElement.outerHTML + document.body.innerText`); strings.Contains(html, pagesCanary) {
		x.t.Errorf("%s shows a secret's value", where)
	}
}
