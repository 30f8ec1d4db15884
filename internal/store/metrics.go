package store

import (
	"context"
	"fmt"
	"time"
)

// The aggregates the harness's /metrics reads at each scrape: each is one statement
// whose cost does not grow with the history the database keeps (no migration: they use
// the indexes there are).

// PoolCount is how many members an environment's warm pool has in one state.
type PoolCount struct {
	Environment, State string
	Members            int64
}

// PoolCounts counts the warm pools' members by environment and state. The rows read are
// the members there are, which the environments' warm_pool sizes bound.
func (s *Store) PoolCounts(ctx context.Context) ([]PoolCount, error) {
	list, err := queryRows(ctx, s.db, func(sc scanner) (PoolCount, error) {
		var c PoolCount
		err := sc.Scan(&c.Environment, &c.State, &c.Members)
		return c, err
	}, `SELECT environment, state, COUNT(*) FROM pool_sandboxes GROUP BY environment, state ORDER BY environment, state`)
	if err != nil {
		return nil, fmt.Errorf("counting warm pool members: %w", err)
	}
	return list, nil
}

// BudgetTotal sums up one budget's counters whose windows are open: how many there are,
// the most any one of them spent and what they spent together, per dimension.
type BudgetTotal struct {
	Budget   string
	Counters int64
	Max, Sum BudgetLimits // SandboxMS in milliseconds, as charged
}

// BudgetTotals sums up the counters of time windows (per_day, every) open at now, per
// budget. It reads at most limit counters, those whose windows end soonest, through
// the index on window_end: a scrape costs the same however many counters past windows
// left. Counters of per_turn and per_session budgets have no end and are not read (a
// turn's or session's counter has no "now" to report).
func (s *Store) BudgetTotals(ctx context.Context, now time.Time, limit int) ([]BudgetTotal, error) {
	list, err := queryRows(ctx, s.db, func(sc scanner) (BudgetTotal, error) {
		var t BudgetTotal
		err := sc.Scan(&t.Budget, &t.Counters, &t.Max.Calls, &t.Max.Bytes, &t.Max.Tokens, &t.Max.SandboxMS,
			&t.Sum.Calls, &t.Sum.Bytes, &t.Sum.Tokens, &t.Sum.SandboxMS)
		return t, err
	}, `SELECT budget, COUNT(*), MAX(calls), MAX(bytes), MAX(tokens), MAX(sandbox_ms),
		CAST(SUM(calls) AS BIGINT), CAST(SUM(bytes) AS BIGINT), CAST(SUM(tokens) AS BIGINT), CAST(SUM(sandbox_ms) AS BIGINT)
		FROM (SELECT budget, calls, bytes, tokens, sandbox_ms FROM budget_usage WHERE window_end > ? ORDER BY window_end LIMIT ?) AS open_counters
		GROUP BY budget ORDER BY budget`, now.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("summing up budget counters: %w", err)
	}
	return list, nil
}
