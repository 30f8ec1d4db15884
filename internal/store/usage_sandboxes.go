package store

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// sandboxEvent is one lifecycle event of a session's sandbox.
type sandboxEvent struct {
	session, kind, environment string
	at                         int64
}

// sandboxSession is a session whose sandbox may have run in a usage window: what its
// record says, and its sandbox's state when the window began (the last lifecycle event
// before it, and the environment of the last sandbox made before it).
type sandboxSession struct {
	id, agent, user        string
	recordEnv, recordState string
	recordAt               int64
	kindBefore, envBefore  string
	atBefore               int64
}

// sandboxUsage sums, per agent, user and environment, the time sandboxes ran within
// f's window. The sessions it looks at are those with a lifecycle event since the
// window's start and those whose sandbox runs now (it may have started long before);
// for each it reads the last lifecycle event before the window (through the log's key,
// backwards, so a long history is not read: `kind || ”` and `created_at + 0` keep the
// planner off the kind-and-time index there, which would read every earlier lifecycle
// event of every session) and the events in the window (through that index).
func (s *Store) sandboxUsage(ctx context.Context, f UsageFilter) ([]SandboxUsage, error) {
	d := s.db.dialect
	kinds := append(append([]string{}, sandboxStarts...), sandboxEnds...)
	in := `(` + placeholders(len(kinds)) + `)`
	kindArgs := make([]any, len(kinds))
	for i, k := range kinds {
		kindArgs[i] = k
	}
	from, to := f.From.UnixMilli(), f.To.UnixMilli()
	var args []any
	args = append(append(args, kindArgs...), from, SandboxStateRunning, SandboxStateChanging)
	args = append(append(args, kindArgs...), from)
	args = append(append(args, kindArgs...), from)
	args = append(args, from)
	q := `WITH cand AS (SELECT session_id FROM session_events WHERE kind IN ` + in + ` AND created_at >= ?
			UNION SELECT session_id FROM session_sandboxes WHERE state IN (?, ?))
		SELECT s.id, s.agent, s.owner, COALESCE(b.environment, ''), COALESCE(b.state, ''), COALESCE(b.state_at, 0),
		COALESCE((SELECT e.kind FROM session_events e WHERE e.session_id = s.id AND e.kind || '' IN ` + in + ` AND e.created_at + 0 < ? ORDER BY e.seq DESC LIMIT 1), ''),
		COALESCE((SELECT e.created_at FROM session_events e WHERE e.session_id = s.id AND e.kind || '' IN ` + in + ` AND e.created_at + 0 < ? ORDER BY e.seq DESC LIMIT 1), 0),
		COALESCE((SELECT ` + d.jsonText("e.payload", "environment") + ` FROM session_events e WHERE e.session_id = s.id AND e.kind || '' = 'sandbox_provisioned' AND e.created_at + 0 < ?
			ORDER BY e.seq DESC LIMIT 1), '')
		FROM cand JOIN sessions s ON s.id = cand.session_id LEFT JOIN session_sandboxes b ON b.session_id = s.id WHERE 1 = 1`
	q, args = usageWhere(q, args, f)
	sessions, err := queryRows(ctx, s.db, func(sc scanner) (sandboxSession, error) {
		var x sandboxSession
		err := sc.Scan(&x.id, &x.agent, &x.user, &x.recordEnv, &x.recordState, &x.recordAt, &x.kindBefore, &x.atBefore, &x.envBefore)
		return x, err
	}, q, args...)
	if err != nil || len(sessions) == 0 {
		return nil, err
	}
	args = append(append([]any{}, kindArgs...), from, to)
	q = `SELECT e.session_id, e.kind, COALESCE(` + d.jsonText("e.payload", "environment") + `, ''), e.created_at
		FROM session_events e JOIN sessions s ON s.id = e.session_id
		WHERE e.kind IN ` + in + ` AND e.created_at >= ? AND e.created_at < ?`
	q, args = usageWhere(q, args, f)
	q += ` ORDER BY e.session_id, e.seq`
	evs, err := queryRows(ctx, s.db, func(sc scanner) (sandboxEvent, error) {
		var e sandboxEvent
		err := sc.Scan(&e.session, &e.kind, &e.environment, &e.at)
		return e, err
	}, q, args...)
	if err != nil {
		return nil, err
	}
	now := s.now().UnixMilli()
	return sumRunning(sessions, evs, from, min(to, max(now, from))), nil
}

// sumRunning pairs each session's lifecycle events into runs and sums each run's part
// within [from, to) per agent, user and environment. A run open at the window's start
// (the last event before it was a start) counts from the start; one still open at the
// last event ends at to if the record says the sandbox runs, else when the record's
// state began (a transition that recorded no event). evs are the window's events,
// ordered by session, then seq.
func sumRunning(sessions []sandboxSession, evs []sandboxEvent, from, to int64) []SandboxUsage {
	type key struct{ agent, user, env string }
	sums := map[key]int64{}
	bySession := map[string][]sandboxEvent{}
	for _, e := range evs {
		bySession[e.session] = append(bySession[e.session], e)
	}
	for _, x := range sessions {
		add := func(env string, start, end int64) {
			start, end = max(start, from), min(end, to)
			if end > start {
				sums[key{x.agent, x.user, cmp.Or(env, x.recordEnv)}] += end - start
			}
		}
		env := x.envBefore
		open, start := slices.Contains(sandboxStarts, x.kindBefore), x.atBefore
		for _, e := range bySession[x.id] {
			if e.environment != "" {
				env = e.environment
			}
			switch {
			case slices.Contains(sandboxStarts, e.kind) && !open:
				open, start = true, e.at
			case slices.Contains(sandboxEnds, e.kind) && open:
				open = false
				add(env, start, e.at)
			}
		}
		if open {
			end := to
			if x.recordState != SandboxStateRunning && x.recordState != SandboxStateChanging {
				end = max(x.recordAt, start)
			}
			add(env, start, end)
		}
	}
	out := make([]SandboxUsage, 0, len(sums))
	for k, ms := range sums {
		out = append(out, SandboxUsage{Agent: k.agent, User: k.user, Environment: k.env, Running: time.Duration(ms) * time.Millisecond})
	}
	slices.SortFunc(out, func(a, b SandboxUsage) int {
		return cmp.Or(cmp.Compare(a.Agent, b.Agent), cmp.Compare(a.User, b.User), cmp.Compare(a.Environment, b.Environment))
	})
	return out
}
