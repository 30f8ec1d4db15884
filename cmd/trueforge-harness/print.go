package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/termsafe"
)

// printer renders a session's events for people (or as JSON lines).
type printer struct {
	// mu serializes the runner's events with the flushes of partial output lines.
	mu        sync.Mutex
	w         io.Writer
	json      bool
	replay    bool
	inText    bool // a streamed model text is open
	streamed  bool // the current model message was streamed
	inOut     bool // a line of command output is open
	outStream string
	lines     map[string]*outputLines // unfinished lines of live output, by stream
	// limit and noKey record how the run ended, for its exit status: at a limit, or
	// with the model's key variable unset.
	limit bool
	noKey bool
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

// finish ends the turn's output: unfinished lines, then any open line.
func (p *printer) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flushOutput()
	p.closeOpen()
}

func (p *printer) event(e runner.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.note(e)
	if p.json {
		if e.Partial {
			b, _ := json.Marshal(map[string]any{"partial": true, "stream": e.Stream, "delta": e.Delta})
			fmt.Fprintln(p.w, string(b))
			return
		}
		b, _ := json.Marshal(map[string]any{"seq": e.Seq, "kind": e.Kind, "payload": e.Payload})
		fmt.Fprintln(p.w, string(b))
		return
	}
	if e.Partial {
		switch e.Stream {
		case "text":
			p.flushOutput()
			if !p.inText {
				p.closeOpen()
				fmt.Fprintf(p.w, "%s: ", p.speaker())
				p.inText, p.streamed = true, true
			}
			fmt.Fprint(p.w, e.Delta)
		default:
			p.outputDelta(e.Stream, e.Delta)
		}
		return
	}
	p.flushOutput()
	p.closeOpen()
	p.render(store.Event{Seq: e.Seq, Kind: e.Kind, Payload: e.Payload}, p.streamed)
	if e.Kind == events.KindModelMessage {
		p.streamed = false
	}
}

// render prints one committed event; textShown says the model text was streamed already.
// Events are read with events.Decode, so logs of earlier harnesses print too.
func (p *printer) render(e store.Event, textShown bool) {
	w := p.w
	ev, err := events.Decode(e.Kind, e.Payload)
	if err != nil {
		fmt.Fprintf(w, "  %s %s\n", e.Kind, string(e.Payload))
		return
	}
	switch v := ev.(type) {
	case events.UserMessage:
		fmt.Fprintf(w, "you: %s\n", v.Text)
		for _, a := range v.Attachments {
			fmt.Fprintf(w, "  [attached] %s · %d bytes · %s · sha256 %s · %s\n", a.Path, a.Size, a.DetectedType, a.SHA256, a.Classification)
		}
	case events.ModelMessage:
		if !textShown && v.Text != "" {
			sp := "agent"
			if v.Replay {
				sp = "agent [replay]"
			}
			fmt.Fprintf(w, "%s: %s\n", sp, v.Text)
		}
		for _, c := range v.ToolCalls {
			fmt.Fprintf(w, "  -> %s %s\n", termsafe.Line(c.Name), termsafe.Line(clip(plainJSON(c.Arguments), 200)))
		}
	case events.ToolResult:
		mark := "<-"
		if v.IsError {
			mark = "<- ERROR"
		}
		extra := ""
		if v.Truncated {
			extra = fmt.Sprintf(" (cut for the model from %d bytes; full output: sessions show SESSION --tool-output %s)", v.FullSize, v.ID)
		}
		fmt.Fprintf(w, "  %s %s%s\n%s\n", mark, termsafe.Line(v.Name), extra, indent(clipLines(v.Text, 12), "     "))
		if a := v.Artifact; a != nil {
			fmt.Fprintf(w, "  [download] %s: %d bytes, sha256 %s, %s, expires %s, snapshot %s\n",
				termsafe.Line(a.Path), a.Size, a.SHA256, a.Classification, a.ExpiresAt.UTC().Format(time.RFC3339), a.SnapshotID)
		}
	case events.Usage:
		fmt.Fprintf(w, "  · tokens: step %d in / %d out; this turn %d / %d\n", v.Step.InputTokens, v.Step.OutputTokens, v.RunInputTokens, v.RunOutputTokens)
	case events.SandboxProvisioned:
		fmt.Fprintf(w, "  [sandbox] PROVISIONED %s (%s backend, provider %s) from environment %s, snapshot %s in %d ms — %s\n",
			v.SandboxID, v.ProviderType, v.Provider, v.Environment, v.SnapshotID, v.TookMS, v.Reason)
		if v.Version != "" {
			fmt.Fprintf(w, "  [sandbox] ROLLOUT: the %s version (the current one for %d%% of new sessions)\n", v.Version, v.RolloutPercent)
		}
		if len(v.UnenforcedLimits) > 0 {
			var names []string
			for _, u := range v.UnenforcedLimits {
				names = append(names, u.Limit)
			}
			fmt.Fprintf(w, "  [sandbox] WARNING: limits not enforced on this host: %s (the sandbox runs with the limits that can be; "+
				"set require_limits = true on the sandbox provider to refuse instead)\n", strings.Join(names, ", "))
			for _, u := range v.UnenforcedLimits {
				fmt.Fprintf(w, "            %s: %s\n", u.Limit, u.Reason)
			}
		}
	case events.SandboxResumed:
		fmt.Fprintf(w, "  [sandbox] RESUMED %s from %s, snapshot %s (recorded %s)\n", v.SandboxID, v.From, v.SnapshotID, v.RecordedSnapshotID)
	case events.SandboxLost:
		seen := "was " + v.State
		if v.BackendStatus != "" {
			seen += "; backend: " + v.BackendStatus
		}
		fmt.Fprintf(w, "  [sandbox] LOST %s (%s): %s\n", v.SandboxID, seen, clip(firstLine(v.Reason), 200))
		if len(v.Uncertain) > 0 {
			fmt.Fprintf(w, "            uncertain files: %s\n", strings.Join(v.Uncertain, ", "))
		}
	case events.SandboxRecovered:
		fmt.Fprintf(w, "  [sandbox] RECOVERED %s\n", v.SandboxID)
	case events.SandboxReclaimed:
		fmt.Fprintf(w, "  [sandbox] RECLAIMED %s: %s\n", v.SandboxID, v.Reason)
	case events.SandboxIdle:
		fmt.Fprintf(w, "  [sandbox] %s %s after %d idle minutes\n", strings.ToUpper(v.State), v.SandboxID, v.IdleMinutes)
	case events.SandboxNetworkReattached: // recorded by harnesses that restarted a sandbox to reconnect its egress socket
		fmt.Fprintf(w, "  [sandbox] NETWORK REATTACHED %s (processes restarted, files kept): %s\n", v.SandboxID, v.Reason)
	case events.Egress:
		p.renderEgress(v)
	case events.SkillLoaded:
		ro := ", read-only"
		if !v.ReadOnly {
			ro = ", NOT read-only"
		}
		fmt.Fprintf(w, "  [skill] LOADED %s (%s) into %s/ of sandbox %s: %d files, %d bytes%s\n", v.Name, v.Digest, v.Path, v.SandboxID, v.Files, v.Bytes, ro)
	case events.MalwareFound:
		fmt.Fprintf(w, "  [malware] BLOCKED %s (sha256 %s): %s found by %s\n", termsafe.Line(v.Path), v.SHA256, termsafe.Line(v.Signature), termsafe.Line(v.Scanner))
	case events.ArchiveExtracted:
		p.renderArchiveExtracted(v) // print_archive.go
	case events.MCPCall:
		p.renderMCPCall(v)
	case events.ToolCall:
		// shown with the model message
	case events.Limit:
		if v.Detail != "" {
			fmt.Fprintf(w, "  ! limit reached: %s: %s\n", v.Limit, termsafe.Line(v.Detail))
		} else {
			fmt.Fprintf(w, "  ! limit reached: %s (%d)\n", v.Limit, v.Value)
		}
	case events.ApprovalRequested:
		p.renderApprovalRequested(v)
	case events.ApprovalDecided:
		fmt.Fprintf(w, "  [approval] %s %s by %s", strings.ToUpper(v.State), v.ID, termsafe.Line(v.By))
		if v.Note != "" {
			fmt.Fprintf(w, ": %s", termsafe.Line(clip(v.Note, 200)))
		}
		fmt.Fprintln(w)
	case events.Cancelled:
		fmt.Fprintf(w, "  ! turn cancelled\n")
	case events.Error:
		fmt.Fprintf(w, "  ! error (%s): %s\n", v.Where, v.Message)
	case events.RunInterrupted:
		fmt.Fprintf(w, "  ! run %s was interrupted: %s\n", v.RunID, v.Reason)
	case events.RunFinished:
		fmt.Fprintf(w, "  — turn %s: %d model steps, %d tokens in, %d out\n", v.Status, v.Steps, v.InputTokens, v.OutputTokens)
	default:
		fmt.Fprintf(w, "  %s %s\n", e.Kind, string(e.Payload))
	}
}

// renderEgress prints one egress decision: what the sandbox tried to reach, whether it
// was let through and why not, and which secrets were substituted (names only).
func (p *printer) renderEgress(d events.Egress) {
	target := d.Host
	if d.Port != "" {
		target += ":" + d.Port
	}
	req := strings.TrimSpace(d.Method + " " + d.Path)
	if req != "" {
		req = " " + req
	}
	if d.Allowed {
		extra := ""
		if len(d.Secrets) > 0 {
			extra = " (secrets substituted: " + strings.Join(d.Secrets, ", ") + ")"
		}
		fmt.Fprintf(p.w, "  [egress] allowed %s %s%s%s\n", d.Mode, target, req, extra)
		return
	}
	fmt.Fprintf(p.w, "  [egress] DENIED %s %s%s: %s — %s\n", d.Mode, target, req, d.Reason, d.Message)
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
func shown(kind string) bool { return kind != events.KindToolCall }

func firstLine(s string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return first
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
	// At a rune boundary: half a rune would be shown as the escapes of its bytes.
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
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

// renderApprovalRequested prints a call that waits for a person: what it would do, who
// may decide and until when, and the command that decides it.
func (p *printer) renderApprovalRequested(v events.ApprovalRequested) {
	if v.What == store.ApprovalKindElicitation {
		fmt.Fprintf(p.w, "  [question] WAITING %s: MCP server %s asks the user: %s (until %s; chat asks at its prompt, the API takes the answer)\n",
			v.ID, termsafe.Line(v.Tool), termsafe.Line(clip(v.Reason, 300)), v.Deadline.UTC().Format(time.RFC3339))
		return
	}
	what := termsafe.Line(v.Tool)
	if v.Server != "" {
		what += " on " + termsafe.Line(v.Server)
	}
	fmt.Fprintf(p.w, "  [approval] WAITING %s: %s needs approval by %s before %s\n", v.ID, what,
		termsafe.Line(strings.Join(v.Approvers, ", ")), v.Deadline.UTC().Format(time.RFC3339))
	if v.Reason != "" {
		fmt.Fprintf(p.w, "             rule %d: %s\n", v.Rule, termsafe.Line(clip(v.Reason, 200)))
	}
	if v.Arguments != "" {
		fmt.Fprintf(p.w, "             arguments: %s\n", termsafe.Line(clip(v.Arguments, 400)))
	}
	if v.Code != "" {
		fmt.Fprintf(p.w, "             %s code:\n%s\n", termsafe.Line(v.Language), indent(clipLines(termsafe.Text(v.Code), 40), "             | "))
	}
	fmt.Fprintf(p.w, "             decide: trueforge-harness approvals approve|deny %s [--note TEXT]\n", v.ID)
}

// renderMCPCall prints one MCP call a Code Mode script made: for whom, its outcome and
// its size (the arguments are in the log only as a digest).
func (p *printer) renderMCPCall(c events.MCPCall) {
	what := strings.ToUpper(c.Outcome)
	if c.Outcome == events.OutcomeCompleted {
		what = fmt.Sprintf("completed, %d bytes", c.ResultBytes)
		if c.IsError {
			what = "completed with a tool error"
		}
	}
	when := ""
	if c.Late {
		when = " (after its script ended)"
	}
	fmt.Fprintf(p.w, "  [mcp] %s call %d for %s%s: %s in %d ms", termsafe.Line(c.Tool), c.Call, c.User, when, what, c.DurationMS)
	if a := c.Approval; a != nil {
		fmt.Fprintf(p.w, " (%s by %s)", a.State, termsafe.Line(a.By))
	}
	if c.Error != "" && c.Outcome != events.OutcomeCompleted {
		fmt.Fprintf(p.w, ": %s", termsafe.Line(clip(c.Error, 200)))
	}
	fmt.Fprintln(p.w)
}
