package budgets_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/budgets"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func load(t *testing.T, list string) *policy.Policy {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, []byte(`{"rules": [], "default": "allow", "budgets": `+list+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var alice = policy.Subject{User: "alice", Owner: "ops", Agent: "pr-bot", Session: "s-1", Turn: "r-1", Server: "https://gh.test/", Tool: "create_pull_request"}

// A call refused by a later budget is refunded to the earlier ones: a refused call
// costs nothing. The refusal names the budget, its limit and when it refills, and wraps
// mcptools.ErrOverBudget.
func TestBudgetRefusedCallIsRefunded(t *testing.T) {
	ctx := context.Background()
	st := harnesstest.NewStore(t)
	now := time.Date(2026, 3, 4, 15, 0, 0, 0, time.UTC)
	m := &budgets.Meter{Store: st, Policy: load(t, `[
	  {"name": "wide", "per": ["user"], "window": "per_day", "calls": 10},
	  {"name": "prs", "tools": ["create_pull_request"], "per": ["user"], "window": "per_day", "calls": 1}
	]`), Now: func() time.Time { return now }}
	if err := m.Admit(ctx, alice); err != nil {
		t.Fatal(err)
	}
	err := m.Admit(ctx, alice)
	e, ok := budgets.IsExceeded(err)
	if !ok || !errors.Is(err, mcptools.ErrOverBudget) || e.Budget != "prs" || e.Dimension != "calls" || e.Used != 1 || e.Limit != 1 {
		t.Fatalf("the second call: %v (%+v); want refused by prs", err, e)
	}
	for _, w := range []string{`budget "prs" (user=alice) has used 1 of its 1 calls per day (UTC)`, "refills at 2026-03-05T00:00:00Z"} {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("the refusal %q lacks %q", err, w)
		}
	}
	usage, err := st.ListBudgetUsage(ctx, store.BudgetFilter{Budget: "wide"})
	if err != nil || len(usage) != 1 || usage[0].Calls != 1 {
		t.Fatalf("wide's counter %+v, %v; want 1 (the refused call refunded)", usage, err)
	}
	// Another tool is not the prs budget's: only wide counts it.
	other := alice
	other.Tool = "list_issues"
	if err := m.Admit(ctx, other); err != nil {
		t.Fatalf("a call prs does not count: %v", err)
	}
}

// Result bytes are charged after the call; once they reach the limit the next call is
// refused until the window refills, which a duration window does on the meter's clock.
func TestBudgetResultBytesAndRefill(t *testing.T) {
	ctx := context.Background()
	st := harnesstest.NewStore(t)
	clock := harnesstest.NewClock()
	m := &budgets.Meter{Store: st, Policy: load(t, `[{"name": "bytes", "per": ["user"], "window": "10m", "result_bytes": 100}]`), Now: clock.Now}
	if err := m.Admit(ctx, alice); err != nil {
		t.Fatal(err)
	}
	m.Spent(ctx, alice, 150)
	err := m.Admit(ctx, alice)
	e, ok := budgets.IsExceeded(err)
	_, end := policy.Window{Kind: policy.WindowDuration, Every: 10 * time.Minute}.Bounds(clock.Now())
	if !ok || e.Dimension != "result_bytes" || e.Used != 150 || !e.Refill.Equal(end) || !strings.Contains(err.Error(), "per 10m0s") {
		t.Fatalf("a call past the bytes: %v (%+v); want refused until %s", err, e, end)
	}
	clock.Advance(10 * time.Minute)
	if err := m.Admit(ctx, alice); err != nil {
		t.Fatalf("a call in the next window: %v", err)
	}
}

// Per-turn and per-session windows say they refill at the next turn or session, and do.
func TestBudgetTurnAndSessionWindows(t *testing.T) {
	ctx := context.Background()
	st := harnesstest.NewStore(t)
	m := &budgets.Meter{Store: st, Policy: load(t, `[
	  {"name": "turn", "window": "per_turn", "calls": 1},
	  {"name": "session", "window": "per_session", "calls": 2}
	]`)}
	if err := m.Admit(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if err := m.Admit(ctx, alice); err == nil || !strings.Contains(err.Error(), "refills at the next turn") {
		t.Fatalf("a second call in the turn: %v", err)
	}
	next := alice
	next.Turn = "r-2"
	if err := m.Admit(ctx, next); err != nil {
		t.Fatalf("the next turn's call: %v", err)
	}
	next.Turn = "r-3"
	if err := m.Admit(ctx, next); err == nil || !strings.Contains(err.Error(), `"session"`) || !strings.Contains(err.Error(), "refills in a new session") {
		t.Fatalf("a third call in the session: %v", err)
	}
	next.Session, next.Turn = "s-2", "r-4"
	if err := m.Admit(ctx, next); err != nil {
		t.Fatalf("a new session's call: %v", err)
	}
}

// Tokens: a step is refused once they are spent, and the budget's own limits only: a
// tokens budget never counts calls.
func TestBudgetTokens(t *testing.T) {
	ctx := context.Background()
	st := harnesstest.NewStore(t)
	m := &budgets.Meter{Store: st, Policy: load(t, `[{"name": "tok", "per": ["agent"], "window": "per_day", "tokens": 100}]`)}
	for range 3 {
		if err := m.Admit(ctx, alice); err != nil {
			t.Fatalf("a call under a tokens-only budget: %v", err)
		}
	}
	if err := m.AdmitTokens(ctx, alice); err != nil {
		t.Fatal(err)
	}
	m.SpendTokens(ctx, alice, 99)
	if err := m.AdmitTokens(ctx, alice); err != nil {
		t.Fatalf("99 of 100 tokens: %v", err)
	}
	m.SpendTokens(ctx, alice, 5)
	if e, ok := budgets.IsExceeded(m.AdmitTokens(ctx, alice)); !ok || e.Dimension != "tokens" || e.Used != 104 {
		t.Fatalf("104 of 100 tokens: %+v", e)
	}
	bob := alice
	bob.User = "bob" // the same agent: one counter
	if err := m.AdmitTokens(ctx, bob); err == nil {
		t.Fatal("another user of the same agent was given a fresh per-agent budget")
	}
}

// Calls racing on two store handles (two replicas) never pass a limit together: on
// SQLite and on PostgreSQL, exactly the limit's calls are admitted.
func TestBudgetConcurrentCallsNeverPassTheLimit(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			ctx := context.Background()
			url := filepath.Join(t.TempDir(), "trueforge.db")
			if db == "postgres" {
				url = pgtest.Get(t).Database(t)
			}
			a := storetest.Open(t, url)
			b := storetest.Open(t, url)
			pol := load(t, `[{"name": "few", "per": ["owner"], "window": "per_day", "calls": 5}]`)
			meters := []*budgets.Meter{{Store: a, Policy: pol}, {Store: b, Policy: pol}}
			var mu sync.Mutex
			admitted, refused := 0, 0
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range 24 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					s := alice
					s.User = []string{"alice", "bob", "carol"}[i%3]
					err := meters[i%2].Admit(ctx, s)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						admitted++
					case errors.Is(err, mcptools.ErrOverBudget):
						refused++
					default:
						t.Error(err)
					}
				}()
			}
			close(start)
			wg.Wait()
			if admitted != 5 || refused != 19 {
				t.Fatalf("%d admitted, %d refused; want 5 and 19", admitted, refused)
			}
			usage, err := a.ListBudgetUsage(ctx, store.BudgetFilter{})
			if err != nil || len(usage) != 1 || usage[0].Calls != 5 || usage[0].Key != "owner=ops" {
				t.Fatalf("the counters %+v, %v", usage, err)
			}
		})
	}
}

// A meter without a policy charges nothing and refuses nothing.
func TestBudgetNoPolicy(t *testing.T) {
	m := &budgets.Meter{Store: harnesstest.NewStore(t)}
	for range 3 {
		if err := m.Admit(context.Background(), alice); err != nil {
			t.Fatal(err)
		}
	}
	var none *policy.Policy
	m.Policy = none
	if err := m.AdmitTokens(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
}
