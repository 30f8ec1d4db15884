package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// The event feed tells the readers of a session's log that it grew, so that an event
// stream reads the store when there is something to read instead of polling it.
//
//   - In this process: every commit that appends events (Commit, AppendEvent) rings the
//     session's watches once it has committed, on both databases.
//   - Across processes on PostgreSQL: the same transaction sends NOTIFY on
//     eventChannel, which PostgreSQL delivers at commit; one connection per process
//     (opened when the first watch starts, kept until Close) LISTENs and rings the
//     watches of this process. NOTIFY names the session by a hash (feedKey), not its
//     id: any role that may connect may LISTEN, and a session id is not for other
//     roles to collect.
//   - Not covered: another process on the same SQLite file (the CLI beside serve), and
//     notifications lost while the listening connection was down (the watches are rung
//     when it is back, so their readers read once). Readers keep a slow poll for those.

// eventChannel is the PostgreSQL channel of the event feed.
const eventChannel = "trueforge_session_events"

// feedKey names a session on the feed.
func feedKey(sessionID string) string {
	sum := sha256.Sum256([]byte("trueforge session events\x00" + sessionID))
	return hex.EncodeToString(sum[:8])
}

// listenRetry bounds the pause between attempts to open the listening connection.
const listenRetry = 5 * time.Second

// eventFeed is a store's watches, and on PostgreSQL its listening connection.
type eventFeed struct {
	source string // the PostgreSQL URL; "" on SQLite (no listener)

	mu        sync.Mutex
	watches   map[string]map[*EventWatch]struct{} // by feedKey
	listening bool
	stop      context.CancelFunc
	stopped   chan struct{}
	// listens counts the LISTENs that took effect (tests wait for the first).
	listens atomic.Int64
}

func newEventFeed(postgresURL string) *eventFeed {
	return &eventFeed{source: postgresURL, watches: map[string]map[*EventWatch]struct{}{}}
}

// EventWatch is a watch on one session's log (Store.WatchEvents).
type EventWatch struct {
	feed *eventFeed
	key  string
	c    chan struct{}
	// latest is the highest seq the feed announced; unknown: the feed may have missed
	// an announcement (its listener reconnected), so the reader should read once.
	latest  atomic.Int64
	unknown atomic.Bool
}

// WatchEvents starts a watch on session sessionID's log: its channel (Ready) receives
// after events are appended to the log (by this process at once; on PostgreSQL by any
// process, within a network round trip). Close it when done.
func (s *Store) WatchEvents(sessionID string) *EventWatch {
	return s.feed.watch(sessionID)
}

// Ready receives (coalesced: one value stands for any number of appends) when the log
// may have grown; then Pending says whether there is something to read.
func (w *EventWatch) Ready() <-chan struct{} { return w.c }

// Pending reports whether the log may hold events after seq after, as far as the feed
// knows, and clears the feed's "unknown" mark.
func (w *EventWatch) Pending(after int64) bool {
	unknown := w.unknown.Swap(false)
	return unknown || w.latest.Load() > after
}

// Close ends the watch.
func (w *EventWatch) Close() {
	f := w.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	if set := f.watches[w.key]; set != nil {
		delete(set, w)
		if len(set) == 0 {
			delete(f.watches, w.key)
		}
	}
}

func (f *eventFeed) watch(sessionID string) *EventWatch {
	w := &EventWatch{feed: f, key: feedKey(sessionID), c: make(chan struct{}, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	set := f.watches[w.key]
	if set == nil {
		set = map[*EventWatch]struct{}{}
		f.watches[w.key] = set
	}
	set[w] = struct{}{}
	if f.source != "" && !f.listening {
		f.listening = true
		ctx, cancel := context.WithCancel(context.Background())
		f.stop, f.stopped = cancel, make(chan struct{})
		go f.listen(ctx, f.stopped)
	}
	return w
}

func (w *EventWatch) ring() {
	select {
	case w.c <- struct{}{}:
	default: // already rung, not yet read
	}
}

// announce rings the watches of key: its log reached seq (0: unknown).
func (f *eventFeed) announce(key string, seq int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for w := range f.watches[key] {
		if seq <= 0 {
			w.unknown.Store(true)
		}
		for cur := w.latest.Load(); seq > cur && !w.latest.CompareAndSwap(cur, seq); cur = w.latest.Load() {
		}
		w.ring()
	}
}

// ringAll marks every watch unknown and rings it: announcements may have been lost.
func (f *eventFeed) ringAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, set := range f.watches {
		for w := range set {
			w.unknown.Store(true)
			w.ring()
		}
	}
}

// appended is called after a commit appended events up to seq to session sessionID.
func (f *eventFeed) appended(sessionID string, seq int64) {
	f.announce(feedKey(sessionID), seq)
}

// notifyPayload is what NOTIFY carries for an append: the session's key and its last seq.
func notifyPayload(sessionID string, seq int64) string {
	return feedKey(sessionID) + " " + strconv.FormatInt(seq, 10)
}

// listen keeps a connection LISTENing on eventChannel until ctx ends, ringing the
// watches of each session announced; after a lost connection it rings them all.
func (f *eventFeed) listen(ctx context.Context, stopped chan struct{}) {
	defer close(stopped)
	for ctx.Err() == nil {
		_ = f.listenOnce(ctx)
		f.ringAll()
		select {
		case <-ctx.Done():
		case <-time.After(listenRetry):
		}
	}
}

func (f *eventFeed) listenOnce(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, f.source)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+eventChannel); err != nil {
		return err
	}
	f.listens.Add(1)
	// Appends between a watch's start and this LISTEN were not announced.
	f.ringAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		key, seq, ok := strings.Cut(n.Payload, " ")
		v, err := strconv.ParseInt(seq, 10, 64)
		if !ok || err != nil {
			v = 0
		}
		f.announce(key, v)
	}
}

// close stops the listener, if one runs.
func (f *eventFeed) close() {
	f.mu.Lock()
	stop, stopped := f.stop, f.stopped
	f.stop, f.listening = nil, false
	f.mu.Unlock()
	if stop != nil {
		stop()
		<-stopped
	}
}

// EventListens is how many times this store's event listener has started LISTENing
// (0 on SQLite, or before the first watch): for tests that need it listening.
func (s *Store) EventListens() int64 { return s.feed.listens.Load() }
