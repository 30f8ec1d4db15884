package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sandboxnet"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// printer renders a session's events for people (or as JSON lines).
type printer struct {
	w        io.Writer
	json     bool
	replay   bool
	inText   bool // a streamed model text is open
	streamed bool // the current model message was streamed
	inOut    bool
}

func newPrinter(w io.Writer, jsonOut, replay bool) *printer {
	return &printer{w: w, json: jsonOut, replay: replay}
}

func (p *printer) header(sessionID string, r *runner.Runner) {
	if p.json {
		return
	}
	label := r.Model.Name()
	if p.replay {
		label = "REPLAY of a scripted model (" + label + "), not a live model"
	}
	fmt.Fprintf(p.w, "session %s · agent %s · model %s\n", sessionID, r.Agent.Name, label)
}

func (p *printer) speaker() string {
	if p.replay {
		return "agent [replay]"
	}
	return "agent"
}

func (p *printer) closeOpen() {
	if p.inText || p.inOut {
		fmt.Fprintln(p.w)
		p.inText, p.inOut = false, false
	}
}

func (p *printer) finish() { p.closeOpen() }

func (p *printer) event(e runner.Event) {
	if p.json {
		if e.Partial {
			b, _ := json.Marshal(map[string]any{"partial": true, "stream": e.Stream, "delta": e.Delta})
			fmt.Fprintln(p.w, string(b))
			return
		}
		b, _ := json.Marshal(map[string]any{"seq": e.Seq, "kind": e.Kind, "payload": json.RawMessage(e.Payload)})
		fmt.Fprintln(p.w, string(b))
		return
	}
	if e.Partial {
		switch e.Stream {
		case "text":
			if !p.inText {
				p.closeOpen()
				fmt.Fprintf(p.w, "%s: ", p.speaker())
				p.inText, p.streamed = true, true
			}
			fmt.Fprint(p.w, e.Delta)
		default:
			if !p.inOut {
				p.closeOpen()
				p.inOut = true
			}
			fmt.Fprint(p.w, indent(e.Delta, "   | "))
			p.inOut = !strings.HasSuffix(e.Delta, "\n")
		}
		return
	}
	p.closeOpen()
	p.render(store.Event{Seq: e.Seq, Kind: e.Kind, Payload: e.Payload}, p.streamed)
	if e.Kind == runner.KindModelMessage {
		p.streamed = false
	}
}

// render prints one committed event; textShown says the model text was streamed already.
func (p *printer) render(e store.Event, textShown bool) {
	var m map[string]any
	_ = json.Unmarshal(e.Payload, &m)
	s := func(k string) string { v, _ := m[k].(string); return v }
	n := func(k string) int64 { v, _ := m[k].(float64); return int64(v) }
	w := p.w
	switch e.Kind {
	case runner.KindUserMessage:
		fmt.Fprintf(w, "you: %s\n", s("text"))
	case runner.KindModelMessage:
		if !textShown && s("text") != "" {
			sp := "agent"
			if r, _ := m["replay"].(bool); r {
				sp = "agent [replay]"
			}
			fmt.Fprintf(w, "%s: %s\n", sp, s("text"))
		}
		calls, _ := m["tool_calls"].([]any)
		for _, c := range calls {
			cm, _ := c.(map[string]any)
			fmt.Fprintf(w, "  -> %s %s\n", cm["name"], clip(plainJSON(cm["arguments"]), 200))
		}
	case runner.KindToolResult:
		mark := "<-"
		if b, _ := m["is_error"].(bool); b {
			mark = "<- ERROR"
		}
		extra := ""
		if b, _ := m["truncated"].(bool); b {
			extra = fmt.Sprintf(" (cut for the model from %d bytes; full output: sessions show SESSION --output %s)", n("full_size"), s("id"))
		}
		fmt.Fprintf(w, "  %s %s%s\n%s\n", mark, s("name"), extra, indent(clipLines(s("text"), 12), "     "))
		if a, ok := m["artifact"].(map[string]any); ok {
			fmt.Fprintf(w, "  [download] %v: %v bytes, sha256 %v, %v, expires %v, snapshot %v\n",
				a["Path"], a["Size"], a["SHA256"], a["Classification"], a["ExpiresAt"], a["SnapshotID"])
		}
	case runner.KindUsage:
		step, _ := m["step"].(map[string]any)
		fmt.Fprintf(w, "  · tokens: step %v in / %v out; this turn %d / %d\n", step["input_tokens"], step["output_tokens"], n("run_input_tokens"), n("run_output_tokens"))
	case lifecycle.EventSandboxProvisioned:
		fmt.Fprintf(w, "  [sandbox] PROVISIONED %s (%s backend, provider %s) from environment %s, snapshot %s in %d ms — %s\n",
			s("sandbox_id"), s("provider_type"), s("provider"), s("environment"), s("snapshot_id"), n("took_ms"), s("reason"))
		var pv lifecycle.Provisioned
		if json.Unmarshal(e.Payload, &pv) == nil && len(pv.UnenforcedLimits) > 0 {
			var names []string
			for _, u := range pv.UnenforcedLimits {
				names = append(names, u.Limit)
			}
			fmt.Fprintf(w, "  [sandbox] WARNING: limits not enforced on this host: %s (the sandbox runs with the limits that can be; "+
				"set require_limits = true on the sandbox provider to refuse instead)\n", strings.Join(names, ", "))
			for _, u := range pv.UnenforcedLimits {
				fmt.Fprintf(w, "            %s: %s\n", u.Limit, u.Reason)
			}
		}
	case "sandbox_resumed":
		fmt.Fprintf(w, "  [sandbox] RESUMED %s from %s, snapshot %s (recorded %s)\n", s("sandbox_id"), s("from"), s("snapshot_id"), s("recorded_snapshot_id"))
	case "sandbox_lost":
		fmt.Fprintf(w, "  [sandbox] LOST %s (%s)\n", s("sandbox_id"), firstNonEmpty(s("status"), s("reason")))
	case "sandbox_recovered":
		fmt.Fprintf(w, "  [sandbox] RECOVERED %s\n", s("sandbox_id"))
	case "sandbox_stopped", "sandbox_archived", "sandbox_deleted":
		fmt.Fprintf(w, "  [sandbox] %s %s after %d idle minutes\n", strings.ToUpper(strings.TrimPrefix(e.Kind, "sandbox_")), s("sandbox_id"), n("idle_minutes"))
	case "sandbox_network_reattached": // recorded by harnesses that restarted a sandbox to reconnect its egress socket
		fmt.Fprintf(w, "  [sandbox] NETWORK REATTACHED %s (processes restarted, files kept): %s\n", s("sandbox_id"), s("reason"))
	case sandboxnet.EventKind:
		p.renderEgress(m)
	case runner.KindToolCall:
		// shown with the model message
	case runner.KindLimit:
		fmt.Fprintf(w, "  ! limit reached: %s (%d)\n", s("limit"), n("value"))
	case runner.KindCancelled:
		fmt.Fprintf(w, "  ! turn cancelled\n")
	case runner.KindError:
		fmt.Fprintf(w, "  ! error (%s): %s\n", s("where"), s("message"))
	case runner.KindRunInterrupted:
		fmt.Fprintf(w, "  ! run %s was interrupted: %s\n", s("run_id"), s("reason"))
	case runner.KindRunFinished:
		fmt.Fprintf(w, "  — turn %s: %d model steps, %d tokens in, %d out\n", s("status"), n("steps"), n("input_tokens"), n("output_tokens"))
	default:
		fmt.Fprintf(w, "  %s %s\n", e.Kind, string(e.Payload))
	}
}

// renderEgress prints one egress decision: what the sandbox tried to reach, whether it
// was let through and why not, and which secrets were substituted (names only).
func (p *printer) renderEgress(m map[string]any) {
	s := func(k string) string { v, _ := m[k].(string); return v }
	target := s("host")
	if port := s("port"); port != "" {
		target += ":" + port
	}
	req := strings.TrimSpace(s("method") + " " + s("path"))
	if req != "" {
		req = " " + req
	}
	if ok, _ := m["allowed"].(bool); ok {
		extra := ""
		if sec, _ := m["secrets"].([]any); len(sec) > 0 {
			names := make([]string, 0, len(sec))
			for _, n := range sec {
				names = append(names, fmt.Sprint(n))
			}
			extra = " (secrets substituted: " + strings.Join(names, ", ") + ")"
		}
		fmt.Fprintf(p.w, "  [egress] allowed %s %s%s%s\n", s("mode"), target, req, extra)
		return
	}
	fmt.Fprintf(p.w, "  [egress] DENIED %s %s%s: %s — %s\n", s("mode"), target, req, s("reason"), s("message"))
}

// plainJSON renders v as JSON without escaping &, < and > (it is shown, not embedded).
func plainJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSpace(b.String())
}

// shown reports whether render prints anything for an event kind.
func shown(kind string) bool { return kind != runner.KindToolCall }

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func indent(s, pre string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l == "" {
			continue
		}
		b.WriteString(pre + l)
	}
	return b.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func clipLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= n {
		return strings.Join(lines, "\n")
	}
	return strings.Join(lines[:n], "\n") + fmt.Sprintf("\n… (%d more lines)", len(lines)-n)
}
