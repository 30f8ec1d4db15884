package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api/web"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// With serve --trace-url, a turn whose user_message carries its trace id links to the
// trace in the operator's backend (a new tab, no referrer); a turn without one, and a
// page without the setting, show no link.
func TestWebTraceLinkEndToEnd(t *testing.T) {
	chrome := findBrowser(t)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, tc := range []struct {
		name, tmpl, want string
	}{
		{"with a trace URL", "https://jaeger.example.com/trace/{trace_id}?uiFind=x", "https://jaeger.example.com/trace/" + traceID + "?uiFind=x"},
		{"without", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := harnesstest.NewStore(t)
			harnesstest.SeedNoSandbox(t, st)
			ctx := context.Background()
			// The agents signIn expects.
			harnesstest.AddAgent(t, st, "analyst", "default", harnesstest.AgentSpec{"model": harnesstest.Script(map[string]any{"text": "ok"}),
				"sandbox": harnesstest.Sandbox("default", 30, 60, 120)})
			harnesstest.AddAgent(t, st, "helper", "", harnesstest.AgentSpec{"model": harnesstest.Script(map[string]any{"text": "Hello."})})
			token := signUp(t, st, "alice")
			const sid = "s-traced"
			if err := st.CreateSession(ctx, store.Session{ID: sid, Agent: "helper", Owner: "alice"}); err != nil {
				t.Fatal(err)
			}
			for _, p := range []events.Payload{
				events.UserMessage{Text: "traced turn", TraceID: traceID}, events.ModelMessage{Text: "Hello."},
				events.RunFinished{RunID: "r1", Status: "completed"},
				events.UserMessage{Text: "untraced turn"}, events.ModelMessage{Text: "Hello again."},
				events.RunFinished{RunID: "r2", Status: "completed"},
			} {
				if _, err := events.Append(ctx, st, sid, "", p); err != nil {
					t.Fatal(err)
				}
			}
			if err := api.CheckTraceURL(tc.tmpl); err != nil {
				t.Fatal(err)
			}
			srv := api.New(api.Config{Store: st, Web: web.Handler(), TraceURL: tc.tmpl})
			ts := serveWeb(t, srv)
			x := newE2E(t, chrome, st, ts, token)
			x.sid = sid
			x.signIn(token)
			x.do("opening the chat", chromedp.Navigate(x.base+"#/s/"+sid))
			x.wait("both turns", `document.querySelectorAll('#conversation .turn.user').length === 2`, 15*time.Second)
			links := eval[[]map[string]any](x, `[...document.querySelectorAll('#conversation .turn.user')].map(u => {
				const a = u.querySelector('a.trace-link');
				return a ? { href: a.getAttribute('href'), target: a.target, rel: a.rel } : null; })`)
			if len(links) != 2 || links[1] != nil {
				t.Fatalf("links %v; want at most one, on the traced turn", links)
			}
			if tc.want == "" {
				if links[0] != nil {
					t.Fatalf("a trace link %v with no --trace-url", links[0])
				}
				return
			}
			if links[0] == nil || links[0]["href"] != tc.want || links[0]["target"] != "_blank" || links[0]["rel"] != "noopener noreferrer" {
				t.Fatalf("the traced turn's link %v; want %s in a new tab without referrer", links[0], tc.want)
			}
		})
	}
}

// The trace link template must be an absolute http(s) URL with {trace_id}.
func TestCheckTraceURL(t *testing.T) {
	for tmpl, ok := range map[string]bool{
		"": true, "https://jaeger.example.com/trace/{trace_id}": true, "http://localhost:16686/trace/{trace_id}": true,
		"https://jaeger.example.com/trace/": false, "javascript:alert('{trace_id}')": false, "/trace/{trace_id}": false,
	} {
		if err := api.CheckTraceURL(tmpl); (err == nil) != ok {
			t.Errorf("CheckTraceURL(%q) = %v; want ok %v", tmpl, err, ok)
		}
	}
}
