package api

import (
	"bytes"
	"encoding/json"
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
// process tells its session's hub is the same committed events (sent on as the run
// encoded them, without a store read) plus the deltas of the running step, which are
// never stored:
//
//   - a committed event the run emitted moves the hub's notified seq; a stream writes it
//     at once when it is the next one it owes, and reads the store up to it when events
//     before it are missing (another writer's, or a stream that joined late). While this
//     process runs the session's turn (from the message's POST, before its first commit),
//     a stream reads no further than that, so a delta is always written after the events
//     before its step and never after the model_message that ends its step; events others
//     appended meanwhile (the sandbox manager, egress) come with the run's next commit,
//     or when the run ends;
//   - with no run here (idle, or another replica runs it), the stream reads the store
//     when the store's event feed says the log grew (store.WatchEvents: every append of
//     this process, and on PostgreSQL every replica's through LISTEN/NOTIFY), and every
//     PollInterval as a safety net (another process on the same SQLite file; a
//     notification lost while the listening connection was down).
//
// A delta carries its offset in the step's text of its stream (bytes); offset 0 starts
// the step's text afresh. A stream that joins mid-step first gets the step's text so
// far as one delta at offset 0, so a client replaces rather than appends what it had.

// hubMsg is what a session's hub sends its streams.
type hubMsg struct {
	kind   int // msgBegin, msgCommit, msgDelta, msgEnd
	seq    int64
	stream string
	text   string
	offset int
	runID  string
	// A committed event's kind, payload and whether the payload is the run's own
	// encoding (runner.Event.Encoded).
	event   string
	payload []byte
	encoded bool
}

const (
	msgBegin = iota
	msgCommit
	msgDelta
	msgEnd
)

// pendingCap bounds the text a hub keeps per stream of the current step, for streams
// that join mid-step.
const pendingCap = 1 << 20

// subBuffer is how many messages a slow stream may fall behind before it is cut off the
// hub (it then reads the store when the store's event feed or poll says, without
// deltas).
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

// subscriber is a stream's queue of hub messages. It grows with what the stream has
// not taken yet, rather than being a channel of subBuffer messages allocated for every
// stream; the stream takes everything queued at once and writes it in one flush.
type subscriber struct {
	ready  chan struct{} // rung (capacity 1) when the queue gets messages
	mu     sync.Mutex
	queue  []hubMsg
	spare  []hubMsg // the last queue taken, reused
	lagged atomic.Bool
}

// push queues m; a queue of subBuffer messages marks the subscriber lagged instead.
func (sub *subscriber) push(m hubMsg) {
	sub.mu.Lock()
	if len(sub.queue) >= subBuffer {
		sub.mu.Unlock()
		sub.lagged.Store(true)
		return
	}
	sub.queue = append(sub.queue, m)
	sub.mu.Unlock()
	select {
	case sub.ready <- struct{}{}:
	default:
	}
}

// take returns what is queued, in order; pass it to done once handled.
func (sub *subscriber) take() []hubMsg {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	q := sub.queue
	sub.queue, sub.spare = sub.spare[:0], nil
	return q
}

// done gives a taken queue back for reuse.
func (sub *subscriber) done(q []hubMsg) {
	clear(q) // drop the payloads it holds
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.spare == nil {
		sub.spare = q[:0]
	}
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
		if !sub.lagged.Load() {
			sub.push(m)
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
		h.send(hubMsg{kind: msgCommit, seq: e.Seq, runID: runID, event: e.Kind, payload: e.Payload, encoded: e.Encoded})
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

// begin: a run of the session starts in this process (its message was accepted); its
// events will come through the hub.
func (h *hub) begin(runID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live, h.runID = true, runID
	clear(h.pending)
	clear(h.offsets)
	h.send(hubMsg{kind: msgBegin, runID: runID})
}

// end: the run is over (its run_finished was emitted), or never started.
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
	sub := &subscriber{ready: make(chan struct{}, 1)}
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
	// The watch starts before the first read, so nothing appended after it is missed.
	watch := s.cfg.Store.WatchEvents(ss.ID)
	defer watch.Close()
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
	st.write([]byte("retry: 2000\n\n"))

	ctx := r.Context()
	// capped: a read stopped at the notified seq, leaving events for later.
	capped := false
	// read writes the stored events after `after`, up to the notified seq while a run
	// here is live (see the comment at the top of this file).
	read := func() error {
		evs, err := s.cfg.Store.Events(ctx, ss.ID, after)
		if err != nil {
			return err
		}
		capped = false
		for _, e := range evs {
			if live && e.Seq > notified {
				capped = true
				break
			}
			st.event(e.Seq, e.Kind, payloadJSON(e.Kind, e.Payload))
			after = e.Seq
		}
		return st.err
	}
	// handle writes what a hub message brings, without flushing.
	handle := func(m hubMsg) error {
		switch m.kind {
		case msgBegin:
			live = true
		case msgCommit:
			live, notified = true, m.seq
			switch {
			case m.seq <= after: // read from the store already
			case m.seq == after+1:
				st.event(m.seq, m.event, hubPayload(m))
				after = m.seq
			default: // events before it are missing: the store has them
				return read()
			}
		case msgDelta:
			if live && after == notified {
				st.delta(m)
			}
		case msgEnd:
			live = false
			// Others appended while the run was live, or a read left events for later.
			if watch.Pending(after) || capped {
				return read()
			}
		}
		return st.err
	}
	if read() != nil || st.flush() != nil {
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
		if live && sub.lagged.Load() {
			// Cut off the hub: read the store uncapped, without deltas, from now on.
			live = false
			if read() != nil || st.flush() != nil {
				return nil
			}
		}
		var err error
		select {
		case <-ctx.Done():
			return nil
		case <-sub.ready:
			// Everything queued, in one write to the client.
			q := sub.take()
			for _, m := range q {
				if err != nil || sub.lagged.Load() {
					break
				}
				err = handle(m)
			}
			sub.done(q)
		case <-watch.Ready():
			if !live && watch.Pending(after) {
				err = read()
			}
		case <-poll.C:
			if !live {
				err = read()
			}
		case <-keep.C:
			st.write([]byte(": keep-alive\n\n"))
		}
		if err != nil || st.flush() != nil {
			return nil
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
	// buf is reused for each event's lines.
	buf []byte
}

// writeDeadline bounds how long a batch of events may take to reach the client.
const writeDeadline = 30 * time.Second

func (st *sseStream) write(b []byte) {
	if st.err != nil {
		return
	}
	if !st.armed {
		_ = st.rc.SetWriteDeadline(time.Now().Add(writeDeadline))
		st.armed = true
	}
	_, st.err = st.w.Write(b)
}

// event writes a committed event: its seq as the id, its kind as the event name, its
// payload (one line of JSON, in the shape this harness records it) as the data.
func (st *sseStream) event(seq int64, kind string, payload []byte) {
	b := st.buf[:0]
	b = append(b, "id: "...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, "\nevent: "...)
	b = append(b, sseField(kind)...)
	b = append(b, "\ndata: "...)
	b = append(b, payload...)
	b = append(b, "\n\n"...)
	st.buf = b
	st.write(b)
}

func (st *sseStream) delta(m hubMsg) {
	j, _ := json.Marshal(deltaJSON{RunID: m.runID, Stream: m.stream, Delta: m.text, Offset: m.offset})
	b := append(append(append(st.buf[:0], "event: delta\ndata: "...), j...), "\n\n"...)
	st.buf = b
	st.write(b)
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

// hubPayload is a committed event's data as the hub brought it: the run's own encoding
// as it is (json.Marshal's output is one line of JSON in today's shape), anything else
// through payloadJSON.
func hubPayload(m hubMsg) []byte {
	if m.encoded {
		return m.payload
	}
	return payloadJSON(m.event, m.payload)
}

// payloadJSON is an event's payload as one line of JSON, read through package events
// so that payloads older harnesses stored in other shapes come out in today's.
func payloadJSON(kind string, payload []byte) []byte {
	if p, err := events.Decode(kind, payload); err == nil {
		if _, unknown := p.(events.Unknown); !unknown {
			if b, err := json.Marshal(p); err == nil {
				return b
			}
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, payload); err != nil {
		b, _ := json.Marshal(map[string]string{"raw": string(payload)})
		return b
	}
	return buf.Bytes()
}

// sseField keeps a value on one line.
func sseField(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}
