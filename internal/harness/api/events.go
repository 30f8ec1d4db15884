package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// The event stream (GET /sessions/{id}/events) is the session's log from the store,
// each event once, in order, with id = its seq, so a reconnect with Last-Event-ID (or
// ?after=N) resumes exactly after it. The store is the truth; what a run in this
// process tells its session's hub only says when to read it, and carries the deltas of
// the running step, which are never stored:
//
//   - a committed event the run emitted moves the hub's notified seq; a stream reads the
//     store up to it. While this process runs the session's turn, a stream reads no
//     further than that, so a delta is always written after the events before its step
//     and never after the model_message that ends its step; events others appended
//     meanwhile (the sandbox manager, egress) come with the run's next commit;
//   - with no run here (idle, or another replica runs it), the stream polls the store
//     every PollInterval, so another replica's run's events appear too (without deltas).
//
// A delta carries its offset in the step's text of its stream (bytes); offset 0 starts
// the step's text afresh. A stream that joins mid-step first gets the step's text so
// far as one delta at offset 0, so a client replaces rather than appends what it had.

// hubMsg is what a session's hub sends its streams.
type hubMsg struct {
	kind   int // msgCommit, msgDelta, msgEnd
	seq    int64
	stream string
	text   string
	offset int
	runID  string
}

const (
	msgCommit = iota
	msgDelta
	msgEnd
)

// pendingCap bounds the text a hub keeps per stream of the current step, for streams
// that join mid-step.
const pendingCap = 1 << 20

// subBuffer is how many messages a slow stream may fall behind before it is cut off the
// hub (it then reads the store by polling, without deltas).
const subBuffer = 4096

// hub fans a session's run in this process out to the session's streams.
type hub struct {
	mu      sync.Mutex
	refs    int // streams and the run holding it
	live    bool
	runID   string
	lastSeq int64
	pending map[string]*strings.Builder // stream -> the current step's text so far
	offsets map[string]int
	subs    map[*subscriber]struct{}
}

type subscriber struct {
	ch     chan hubMsg
	lagged atomic.Bool
}

// hubFor returns the session's hub, holding a reference (dropHub releases it).
func (s *Server) hubFor(sessionID string) *hub {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hubs[sessionID]
	if h == nil {
		h = &hub{subs: map[*subscriber]struct{}{}, pending: map[string]*strings.Builder{}, offsets: map[string]int{}}
		s.hubs[sessionID] = h
	}
	h.refs++
	return h
}

func (s *Server) dropHub(sessionID string, h *hub) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h.refs--
	if h.refs <= 0 && s.hubs[sessionID] == h {
		delete(s.hubs, sessionID)
	}
}

func (h *hub) send(m hubMsg) {
	for sub := range h.subs {
		if sub.lagged.Load() {
			continue
		}
		select {
		case sub.ch <- m:
		default:
			sub.lagged.Store(true)
		}
	}
}

// emit is the run's emit: committed events move the notified seq and end the step;
// deltas are kept for late joiners and sent.
func (h *hub) emit(runID string, e runner.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !e.Partial {
		h.live, h.runID, h.lastSeq = true, runID, e.Seq
		if !midStep(e.Kind) {
			clear(h.pending)
			clear(h.offsets)
		}
		h.send(hubMsg{kind: msgCommit, seq: e.Seq, runID: runID})
		return
	}
	off := h.offsets[e.Stream]
	h.offsets[e.Stream] = off + len(e.Delta)
	b := h.pending[e.Stream]
	if b == nil {
		b = &strings.Builder{}
		h.pending[e.Stream] = b
	}
	if b.Len() == off && off+len(e.Delta) <= pendingCap {
		b.WriteString(e.Delta)
	}
	h.send(hubMsg{kind: msgDelta, stream: e.Stream, text: e.Delta, offset: off, runID: runID})
}

// midStep reports whether an event of kind is recorded while a step runs, without
// ending it: an approval the running call waits for. The step's output so far (a
// script's prints before its call waits) then goes on from where it was, rather than
// starting afresh at offset 0.
func midStep(kind string) bool {
	return kind == events.KindApprovalRequested || kind == events.KindApprovalDecided
}

// end: the run is over (its run_finished was emitted).
func (h *hub) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live = false
	clear(h.pending)
	clear(h.offsets)
	h.send(hubMsg{kind: msgEnd})
}

// subscribe adds a stream and returns what it needs to start consistently: whether a
// run here is live, the last seq it emitted, and the current step's text so far.
func (h *hub) subscribe() (*subscriber, bool, int64, []hubMsg) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sub := &subscriber{ch: make(chan hubMsg, subBuffer)}
	h.subs[sub] = struct{}{}
	var pend []hubMsg
	if h.live {
		for stream, b := range h.pending {
			if b.Len() > 0 {
				pend = append(pend, hubMsg{kind: msgDelta, stream: stream, text: b.String(), offset: 0, runID: h.runID})
			}
		}
	}
	return sub, h.live, h.lastSeq, pend
}

func (h *hub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, sub)
}

// deltaJSON is the data of an `event: delta`.
type deltaJSON struct {
	RunID  string `json:"run_id"`
	Stream string `json:"stream"` // "text", "stdout" or "stderr"
	Delta  string `json:"delta"`
	Offset int    `json:"offset"`
}

// streamEvents serves GET /sessions/{id}/events.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, ss store.Session) error {
	after, err := resumePoint(r)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	h := s.hubFor(ss.ID)
	defer s.dropHub(ss.ID, h)
	sub, live, notified, pend := h.subscribe()
	defer h.unsubscribe(sub)
	s.metrics.streams.Add(1)
	defer s.metrics.streams.Add(-1)

	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no") // tell a proxy in front not to buffer
	w.WriteHeader(http.StatusOK)
	st := &sseStream{w: w, rc: rc}
	st.printf("retry: 2000\n\n")

	ctx := r.Context()
	// flush writes the events after `after`, up to the notified seq while a run here is
	// live (see the comment at the top of this file).
	flush := func() error {
		evs, err := s.cfg.Store.Events(ctx, ss.ID, after)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if live && e.Seq > notified {
				break
			}
			st.event(e)
			after = e.Seq
		}
		return st.flush()
	}
	if err := flush(); err != nil {
		return nil // the client went away, or the store failed mid-stream: end it
	}
	if live && after == notified {
		for _, m := range pend {
			st.delta(m)
		}
		if st.flush() != nil {
			return nil
		}
	}
	keep := time.NewTicker(s.cfg.KeepAlive)
	defer keep.Stop()
	poll := time.NewTicker(s.cfg.PollInterval)
	defer poll.Stop()
	for {
		if sub.lagged.Load() && live {
			// Cut off the hub: read the store uncapped, without deltas, from now on.
			live = false
		}
		select {
		case <-ctx.Done():
			return nil
		case m := <-sub.ch:
			if sub.lagged.Load() {
				continue
			}
			switch m.kind {
			case msgCommit:
				live, notified = true, m.seq
				if err := flush(); err != nil {
					return nil
				}
			case msgDelta:
				if live && after == notified {
					st.delta(m)
					if st.flush() != nil {
						return nil
					}
				}
			case msgEnd:
				live = false
				if err := flush(); err != nil {
					return nil
				}
			}
		case <-poll.C:
			if !live {
				if err := flush(); err != nil {
					return nil
				}
			}
		case <-keep.C:
			st.printf(": keep-alive\n\n")
			if st.flush() != nil {
				return nil
			}
		}
	}
}

// resumePoint is the seq a stream resumes after: Last-Event-ID (what a reconnecting
// EventSource sends) wins over ?after=N; neither means from the start.
func resumePoint(r *http.Request) (int64, error) {
	v, where := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if v == "" {
		v, where = r.URL.Query().Get("after"), "after"
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, errorf(http.StatusBadRequest, CodeBadRequest, "%s must be an event id (a seq, 0 or more), not %q", where, v)
	}
	return n, nil
}

// sseStream writes Server-Sent Events, remembering the first write error.
type sseStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
	// armed: the write deadline is set for the writes since the last flush. Each batch
	// gets a fresh one: a stream lives long, a stalled client does not.
	armed bool
}

// writeDeadline bounds how long a batch of events may take to reach the client.
const writeDeadline = 30 * time.Second

func (st *sseStream) printf(format string, args ...any) {
	if st.err != nil {
		return
	}
	if !st.armed {
		_ = st.rc.SetWriteDeadline(time.Now().Add(writeDeadline))
		st.armed = true
	}
	_, st.err = fmt.Fprintf(st.w, format, args...)
}

// event writes a committed event: its seq as the id, its kind as the event name, its
// payload (in the shape this harness records it) as the data.
func (st *sseStream) event(e store.Event) {
	st.printf("id: %d\nevent: %s\ndata: %s\n\n", e.Seq, sseField(e.Kind), payloadJSON(e))
}

func (st *sseStream) delta(m hubMsg) {
	b, _ := json.Marshal(deltaJSON{RunID: m.runID, Stream: m.stream, Delta: m.text, Offset: m.offset})
	st.printf("event: delta\ndata: %s\n\n", b)
}

func (st *sseStream) flush() error {
	if st.err != nil {
		return st.err
	}
	if !st.armed {
		_ = st.rc.SetWriteDeadline(time.Now().Add(writeDeadline))
	}
	st.err = st.rc.Flush()
	st.armed = false
	return st.err
}

// payloadJSON is an event's payload as one line of JSON, read through package events
// so that payloads older harnesses stored in other shapes come out in today's.
func payloadJSON(e store.Event) []byte {
	if p, err := events.Decode(e.Kind, e.Payload); err == nil {
		if _, unknown := p.(events.Unknown); !unknown {
			if b, err := json.Marshal(p); err == nil {
				return b
			}
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, e.Payload); err != nil {
		b, _ := json.Marshal(map[string]string{"raw": string(e.Payload)})
		return b
	}
	return buf.Bytes()
}

// sseField keeps a value on one line.
func sseField(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }
