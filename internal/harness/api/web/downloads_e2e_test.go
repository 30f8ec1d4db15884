package web_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api/web"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// offerInLog records, in session sid's log and store, what offer_artifact records when
// it offers path with class: the call, its result with the artifact, and the artifact.
func offerInLog(t *testing.T, st *store.Store, sid, id, path, class string) {
	t.Helper()
	ctx := context.Background()
	args, _ := json.Marshal(map[string]string{"path": path, "classification": class})
	seq, err := events.Append(ctx, st, sid, "", events.ToolCall{ID: id, Name: "offer_artifact", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	content := []byte(path + "\n")
	sum := sha256.Sum256(content)
	now := time.Now()
	a := store.Artifact{ID: "art-" + id, SessionID: sid, Path: path, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(content)), SourceEvent: seq,
		Classification: class, DetectedType: "text", Content: content, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := st.PutArtifact(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := events.Append(ctx, st, sid, "", events.ToolResult{ID: id, Name: "offer_artifact", Text: "offered " + path, Artifact: events.ArtifactOf(&a)}); err != nil {
		t.Fatal(err)
	}
}

// The download card, in a chat reopened from its log: each offered file shows its
// three verdicts (classification, type, scan) as badges, and a restricted file shows
// why it does not download, with no link, instead of a Download button; the files
// panel says the same. Laid out within a 390 px phone. No sandbox is needed: the files
// were offered in the log.
func TestWebDownloadCardEndToEnd(t *testing.T) {
	chrome := findBrowser(t)
	st := harnesstest.NewStore(t)
	harnesstest.SeedNoSandbox(t, st)
	ctx := context.Background()
	harnesstest.AddAgent(t, st, "analyst", "default", harnesstest.AgentSpec{"model": harnesstest.Script(map[string]any{"text": "ok"}),
		"sandbox": harnesstest.Sandbox("default", 30, 60, 120)})
	harnesstest.AddAgent(t, st, "helper", "", harnesstest.AgentSpec{"model": harnesstest.Script(map[string]any{"text": "Hello."})})
	token := signUp(t, st, "alice")
	const sid = "s-cards"
	if err := st.CreateSession(ctx, store.Session{ID: sid, Agent: "analyst", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := events.Append(ctx, st, sid, "", events.UserMessage{Text: "The report and the plan, please."}); err != nil {
		t.Fatal(err)
	}
	offerInLog(t, st, sid, "c1", "out/report.csv", "internal")
	offerInLog(t, st, sid, "c2", "plan.txt", "restricted")
	for _, p := range []events.Payload{events.ModelMessage{Text: "Here they are."}, events.RunFinished{RunID: "r1", Status: "completed"}} {
		if _, err := events.Append(ctx, st, sid, "", p); err != nil {
			t.Fatal(err)
		}
	}

	srv := api.New(api.Config{Store: st, Web: web.Handler()})
	ts := serveWeb(t, srv)
	x := newE2E(t, chrome, st, ts, token)
	x.sid = sid
	x.signIn(token)
	x.do("opening the chat", chromedp.Navigate(x.base+"#/s/"+sid))
	x.wait("the cards' verdicts", `document.querySelectorAll('#conversation .file-card [data-verdict="scan"]').length === 2`, 15*time.Second)
	checkCards(x, "#conversation")
	x.cardShots("download-card-refused", "#conversation .file-card.refused", "center")

	x.do("opening the files panel", chromedp.Click(chromedp.ID("files-btn")))
	x.wait("the files panel", `document.querySelectorAll('#files-panel .file-card').length === 2`, 10*time.Second)
	checkCards(x, "#files-panel")
	x.do("phone", viewport(390, 844, false), chromedp.Sleep(200*time.Millisecond))
	if over := eval[[]string](x, `[...document.querySelectorAll('.file-card, .file-refusal, .file-verdicts')]
		.filter(e => e.getClientRects().length && e.getBoundingClientRect().right > window.innerWidth + 0.5).map(e => e.className)`); len(over) > 0 {
		x.t.Errorf("at 390 px, wider than the window: %q", over)
	}
	if w := eval[float64](x, `document.documentElement.scrollWidth - window.innerWidth`); w > 0 {
		x.t.Errorf("at 390 px the page scrolls sideways by %v px", w)
	}
	x.do("back to desktop", desktop)
}

// checkCards checks the two cards under root: the report downloads and shows its
// verdicts; the plan shows the refusal's reason and no link.
func checkCards(x *e2e, root string) {
	x.t.Helper()
	cards := eval[[]map[string]any](x, `[...document.querySelectorAll(`+jsString(root+" .file-card")+`)].map(c => ({
		path: c.dataset.path,
		verdicts: [...c.querySelectorAll('[data-verdict]')].map(b => b.dataset.verdict + '=' + b.textContent),
		link: !!c.querySelector('a.file-download'),
		refusal: (c.querySelector('.file-refusal') || {}).textContent || '',
		button: (c.querySelector('.btn') || {}).textContent || '' }))`)
	if len(cards) != 2 {
		x.t.Fatalf("%s: %d cards: %v", root, len(cards), cards)
	}
	wantVerdicts := map[string]string{"out/report.csv": "classification=internal type=text scan=scanner off",
		"plan.txt": "classification=restricted type=text scan=scanner off"}
	for _, c := range cards {
		p := c["path"].(string)
		var vs []string
		for _, v := range c["verdicts"].([]any) {
			vs = append(vs, v.(string))
		}
		if got := strings.Join(vs, " "); got != wantVerdicts[p] {
			x.t.Errorf("%s, %s: verdicts %q; want %q", root, p, got, wantVerdicts[p])
		}
		refusal := c["refusal"].(string)
		switch p {
		case "out/report.csv":
			if c["link"] != true || refusal != "" {
				x.t.Errorf("%s, the report: %v", root, c)
			}
		case "plan.txt":
			if c["link"] != false || c["button"] != "Not released" ||
				!strings.Contains(refusal, "plan.txt is classified restricted, which nobody may download until an admin releases it") {
				x.t.Errorf("%s, the plan: %v", root, c)
			}
		}
	}
}
