package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
)

// lineFlushInterval is how long a partial line of command output waits for the rest of
// its line before it is shown anyway (a prompt, a progress bar). Programs write their
// output in pieces (Python's print writes each argument separately when unbuffered),
// and the pieces arrive as separate events: printing each as it comes cut lines apart.
const lineFlushInterval = 200 * time.Millisecond

// outputLines buffers one stream's live command output into whole lines.
type outputLines struct {
	pending string
	timer   *time.Timer
}

// outputDelta prints the whole lines a piece of stream's output completes and keeps the
// rest until its newline or lineFlushInterval. The caller holds p.mu.
func (p *printer) outputDelta(stream, delta string) {
	if p.lines == nil {
		p.lines = map[string]*outputLines{}
	}
	b := p.lines[stream]
	if b == nil {
		b = &outputLines{}
		p.lines[stream] = b
	}
	b.pending += delta
	i := strings.LastIndexByte(b.pending, '\n')
	if i >= 0 {
		p.writeOutput(stream, b.pending[:i+1])
		b.pending = b.pending[i+1:]
	}
	if b.pending == "" {
		if b.timer != nil {
			b.timer.Stop()
			b.timer = nil
		}
		return
	}
	if b.timer == nil {
		b.timer = time.AfterFunc(lineFlushInterval, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.lines[stream] == b {
				b.timer = nil
				p.flushStream(stream)
			}
		})
	}
}

// flushStream shows what stream holds of an unfinished line. The caller holds p.mu.
func (p *printer) flushStream(stream string) {
	b := p.lines[stream]
	if b == nil || b.pending == "" {
		return
	}
	p.writeOutput(stream, b.pending)
	b.pending = ""
}

// flushOutput shows every stream's unfinished line and stops their timers, before
// anything else is printed. The caller holds p.mu.
func (p *printer) flushOutput() {
	for stream, b := range p.lines {
		if b.timer != nil {
			b.timer.Stop()
			b.timer = nil
		}
		p.flushStream(stream)
	}
}

// writeOutput prints command output: "   | " starts each line, and an unfinished line
// stays open (inOut) so that the rest of it continues on the same line, unless another
// stream's output or an event comes first. The caller holds p.mu.
func (p *printer) writeOutput(stream, s string) {
	if p.inOut && p.outStream != stream || p.inText {
		p.closeOpen()
	}
	if p.inOut {
		first, rest, nl := strings.Cut(s, "\n")
		fmt.Fprint(p.w, first)
		if !nl {
			return
		}
		fmt.Fprintln(p.w)
		p.inOut = false
		s = rest
	}
	if s == "" {
		return
	}
	fmt.Fprint(p.w, indent(s, "   | "))
	p.inOut, p.outStream = !strings.HasSuffix(s, "\n"), stream
}

// note records what the exit status of a run depends on: a limit reached, or a model
// call that failed because its key variable is unset. The caller holds p.mu.
func (p *printer) note(e runner.Event) {
	if e.Partial {
		return
	}
	switch e.Kind {
	case events.KindLimit:
		p.limit = true
	case events.KindError:
		var v events.Error
		if json.Unmarshal(e.Payload, &v) == nil && v.Where == "model" && strings.Contains(v.Message, model.ErrNoKey.Error()) {
			p.noKey = true
		}
	}
}
