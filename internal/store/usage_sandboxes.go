package store

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// sandboxEvent is one lifecycle event of a session's sandbox, with what the usage query
// needs of its session and of the session's sandbox record.
type sandboxEvent struct {
	session, agent, user, kind, environment string
	at                                      int64
	// The record: its environment, state and when that state began ("" and 0 when the
	// session has none).
	recordEnv, recordState string
	recordAt               int64
}

// sandboxUsage sums, per agent, user and environment, the time sandboxes ran within
// f's window. It reads the lifecycle events, up to the window's end, of the sessions
// whose sandbox may have run in it: those with a lifecycle event since the window's
// start, and those whose sandbox runs now (it may have started long before). Runs are
// paired in each session's order: a start opens one (a second start while open keeps
// the first), an end closes it; one still open at the last event ends at the window's
// end if the record says the sandbox runs, else when the record's state began (a
// transition that recorded no event).
func (s *Store) sandboxUsage(ctx context.Context, f UsageFilter) ([]SandboxUsage, error) {
	d := s.db.dialect
	kinds := append(append([]string{}, sandboxStarts...), sandboxEnds...)
	in := `(` + placeholders(len(kinds)) + `)`
	args := []any{}
	for _, k := range kinds {
		args = append(args, k)
	}
	args = append(args, f.To.UnixMilli())
	for _, k := range kinds {
		args = append(args, k)
	}
	args = append(args, f.From.UnixMilli(), SandboxStateRunning, SandboxStateChanging)
	q := `SELECT e.session_id, s.agent, s.owner, e.kind, COALESCE(` + d.jsonText("e.payload", "environment") + `, ''), e.created_at,
		COALESCE(b.environment, ''), COALESCE(b.state, ''), COALESCE(b.state_at, 0)
		FROM session_events e JOIN sessions s ON s.id = e.session_id LEFT JOIN session_sandboxes b ON b.session_id = e.session_id
		WHERE e.kind IN ` + in + ` AND e.created_at < ?
		AND (e.session_id IN (SELECT x.session_id FROM session_events x WHERE x.kind IN ` + in + ` AND x.created_at >= ?)
			OR b.state IN (?, ?))`
	q, args = usageWhere(q, args, f)
	q += ` ORDER BY e.session_id, e.seq`
	evs, err := queryRows(ctx, s.db, func(sc scanner) (sandboxEvent, error) {
		var e sandboxEvent
		err := sc.Scan(&e.session, &e.agent, &e.user, &e.kind, &e.environment, &e.at, &e.recordEnv, &e.recordState, &e.recordAt)
		return e, err
	}, q, args...)
	if err != nil {
		return nil, err
	}
	now := s.now().UnixMilli()
	return sumRunning(evs, f.From.UnixMilli(), min(f.To.UnixMilli(), max(now, f.From.UnixMilli()))), nil
}

// sumRunning pairs the lifecycle events evs (ordered by session, then seq) into runs
// and sums each run's part within [from, to) per agent, user and environment.
func sumRunning(evs []sandboxEvent, from, to int64) []SandboxUsage {
	type key struct{ agent, user, env string }
	sums := map[key]int64{}
	add := func(e sandboxEvent, env string, start, end int64) {
		start, end = max(start, from), min(end, to)
		if end > start {
			sums[key{e.agent, e.user, env}] += end - start
		}
	}
	for i := 0; i < len(evs); {
		j := i
		env, open, start := "", false, int64(0)
		for ; j < len(evs) && evs[j].session == evs[i].session; j++ {
			e := evs[j]
			if e.environment != "" {
				env = e.environment
			}
			switch {
			case slices.Contains(sandboxStarts, e.kind) && !open:
				open, start = true, e.at
			case slices.Contains(sandboxEnds, e.kind) && open:
				open = false
				add(e, cmp.Or(env, e.recordEnv), start, e.at)
			}
		}
		if last := evs[j-1]; open {
			end := to
			if last.recordState != SandboxStateRunning && last.recordState != SandboxStateChanging {
				end = max(last.recordAt, start)
			}
			add(last, cmp.Or(env, last.recordEnv), start, end)
		}
		i = j
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
