package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Budgets (issue 26) are counters of what the harness's calls spend, in budget_usage
// (migration 17, approvals.go): one row per budget, key and window.

// BudgetCharge is one atomic charge against one budget counter.
type BudgetCharge struct {
	Budget      string    // the budget's name in the operator's policy
	Key         string    // which counter of it: e.g. "user=alice" or "owner=ops,agent=pr-bot" (the caller builds it)
	User        string    // the user the counter is for, "" when the key has no user (for listing own usage)
	WindowStart time.Time // zero for windows that are keys (per_session, per_turn)
	WindowEnd   time.Time // when it refills (zero: never)
	// What to add now (none negative).
	Calls, Bytes, Tokens, SandboxMS int64
	// Limits (0 = none on that dimension). When Check is true the charge is made only if,
	// for every limited dimension d: used_d + add_d <= limit_d, and used_d < limit_d
	// when add_d is 0 (a dimension measured after the fact refuses new work once spent).
	Limits BudgetLimits
	Check  bool
}

// BudgetLimits are a budget's limits per dimension; 0 is none.
type BudgetLimits struct{ Calls, Bytes, Tokens, SandboxMS int64 }

// BudgetUsage is a row of budget_usage: what one counter has spent in its window.
type BudgetUsage struct {
	Budget, Key, User               string
	WindowStart, WindowEnd          time.Time // zero: none
	Calls, Bytes, Tokens, SandboxMS int64
	UpdatedAt                       time.Time
}

// budgetDimensions are budget_usage's counting columns, in the order of dims.
var budgetDimensions = [4]string{"calls", "bytes", "tokens", "sandbox_ms"}

// dims are a charge's amounts, or a budget's limits, in budgetDimensions' order.
func dims(calls, bytes, tokens, sandboxMS int64) [4]int64 {
	return [4]int64{calls, bytes, tokens, sandboxMS}
}

// budgetColumns are the columns scanBudgetUsage reads, in its order.
const budgetColumns = `budget, key, user_name, window_start, window_end, calls, bytes, tokens, sandbox_ms, updated_at`

func scanBudgetUsage(sc scanner) (BudgetUsage, error) {
	var u BudgetUsage
	var start, end, updated int64
	err := sc.Scan(&u.Budget, &u.Key, &u.User, &start, &end, &u.Calls, &u.Bytes, &u.Tokens, &u.SandboxMS, &updated)
	u.WindowStart, u.WindowEnd, u.UpdatedAt = fromMillis(start), fromMillis(end), time.UnixMilli(updated)
	return u, err
}

// chargeSQL is ChargeBudget's statement before its condition: insert the counter with
// the charge, or add the charge to the counter there is. The condition (chargeLimits)
// follows as the update's WHERE; RETURNING is appended after it.
const chargeSQL = `INSERT INTO budget_usage(` + budgetColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (budget, key, window_start) DO UPDATE SET
		calls = budget_usage.calls + excluded.calls, bytes = budget_usage.bytes + excluded.bytes,
		tokens = budget_usage.tokens + excluded.tokens, sandbox_ms = budget_usage.sandbox_ms + excluded.sandbox_ms,
		updated_at = excluded.updated_at`

// ChargeBudget charges c in one SQL statement: an insert of the counter that, when the
// counter exists, adds to it only where the limits still hold, returning the counter
// as charged. The database evaluates the limits on the row as the previous charge left
// it (SQLite runs one writer at a time; PostgreSQL's upsert locks the row and checks its
// latest version), so replicas and sessions sharing one counter never both pass a
// limit, and a charge costs one statement.
//
// A counter's first charge is an insert, which has no condition: that it fits alone
// (add_d <= limit_d) is checked here, before any statement. ok is false when the charge
// would pass a limit, with the usage as it stands (read once more; zero counts for a
// counter never charged); nothing was charged then.
func (s *Store) ChargeBudget(ctx context.Context, c BudgetCharge) (usage BudgetUsage, ok bool, err error) {
	add := dims(c.Calls, c.Bytes, c.Tokens, c.SandboxMS)
	limits := dims(c.Limits.Calls, c.Limits.Bytes, c.Limits.Tokens, c.Limits.SandboxMS)
	for i, a := range add {
		if a < 0 || limits[i] < 0 {
			return BudgetUsage{}, false, fmt.Errorf("charging budget %q (%s): negative %s", c.Budget, c.Key, budgetDimensions[i])
		}
	}
	start := millis(c.WindowStart)
	args := []any{c.Budget, c.Key, c.User, start, millis(c.WindowEnd), add[0], add[1], add[2], add[3], s.stamp()}
	var where []string
	for i, limit := range limits {
		if !c.Check || limit == 0 {
			continue
		}
		if add[i] > limit {
			return s.budgetRefused(ctx, c)
		}
		// used + add <= limit, and used < limit: for an add of at least 1 the second
		// follows from the first, and for an add of 0 it is what refuses new work once
		// an after-the-fact dimension is spent.
		col := `budget_usage.` + budgetDimensions[i]
		where = append(where, col+` + ? <= ? AND `+col+` < ?`)
		args = append(args, add[i], limit, limit)
	}
	q := chargeSQL
	if len(where) > 0 {
		// At most 2^4 texts, so rebind's cache stays small.
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	usage, err = scanBudgetUsage(s.db.QueryRowContext(ctx, q+` RETURNING `+budgetColumns, args...))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// The update's condition was false: both databases then return no row.
		return s.budgetRefused(ctx, c)
	case err != nil:
		return BudgetUsage{}, false, fmt.Errorf("charging budget %q (%s): %w", c.Budget, c.Key, err)
	}
	return usage, true, nil
}

// RefundBudget takes back a charge that ChargeBudget made (c as it was charged), never
// below zero: a call that a later budget refused is then counted by none.
func (s *Store) RefundBudget(ctx context.Context, c BudgetCharge) error {
	_, err := s.db.ExecContext(ctx, `UPDATE budget_usage SET
		calls = CASE WHEN calls > ? THEN calls - ? ELSE 0 END, bytes = CASE WHEN bytes > ? THEN bytes - ? ELSE 0 END,
		tokens = CASE WHEN tokens > ? THEN tokens - ? ELSE 0 END, sandbox_ms = CASE WHEN sandbox_ms > ? THEN sandbox_ms - ? ELSE 0 END
		WHERE budget = ? AND key = ? AND window_start = ?`,
		c.Calls, c.Calls, c.Bytes, c.Bytes, c.Tokens, c.Tokens, c.SandboxMS, c.SandboxMS, c.Budget, c.Key, millis(c.WindowStart))
	if err != nil {
		return fmt.Errorf("refunding budget %q (%s): %w", c.Budget, c.Key, err)
	}
	return nil
}

// budgetRefused is ChargeBudget's answer to a charge that would pass a limit: the
// counter's usage as it stands.
func (s *Store) budgetRefused(ctx context.Context, c BudgetCharge) (BudgetUsage, bool, error) {
	u, err := scanBudgetUsage(s.db.QueryRowContext(ctx, `SELECT `+budgetColumns+` FROM budget_usage WHERE budget = ? AND key = ? AND window_start = ?`,
		c.Budget, c.Key, millis(c.WindowStart)))
	if errors.Is(err, sql.ErrNoRows) {
		return BudgetUsage{Budget: c.Budget, Key: c.Key, User: c.User, WindowStart: c.WindowStart, WindowEnd: c.WindowEnd}, false, nil
	}
	if err != nil {
		return BudgetUsage{}, false, fmt.Errorf("reading budget %q (%s): %w", c.Budget, c.Key, err)
	}
	return u, false, nil
}

// BudgetFilter selects counters to list; "" selects any.
type BudgetFilter struct{ User, Budget string }

// ListBudgetUsage lists the counters f selects, of current and past windows (until
// pruned), newest window first.
func (s *Store) ListBudgetUsage(ctx context.Context, f BudgetFilter) ([]BudgetUsage, error) {
	q, args := `SELECT `+budgetColumns+` FROM budget_usage WHERE 1 = 1`, []any{}
	q, args = andEqual(q, args, "user_name", f.User)
	q, args = andEqual(q, args, "budget", f.Budget)
	list, err := queryRows(ctx, s.db, scanBudgetUsage, q+` ORDER BY window_start DESC, budget, key`, args...)
	if err != nil {
		return nil, fmt.Errorf("listing budget usage: %w", err)
	}
	return list, nil
}

// PruneBudgetUsage deletes the counters of windows that ended before before (counters
// without an end are kept), returning how many.
func (s *Store) PruneBudgetUsage(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM budget_usage WHERE window_end <> 0 AND window_end < ?`, before.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("pruning budget usage: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
