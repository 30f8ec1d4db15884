package mcptools_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/approvals"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/budgets"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// gated is a real MCP server on loopback, a control plane on db ("postgres", else
// SQLite), and two toolsets of alice's agent on the server: one without a policy, and
// one governed by policyText (its approvals and budgets in the control plane).
func gated(tb testing.TB, db, policyText string) (*store.Store, *mcptools.Toolset, *mcptools.Toolset) {
	tb.Helper()
	url := filepath.Join(tb.TempDir(), "db.sqlite")
	if db == "postgres" {
		url = pgtest.Get(tb).Database(tb)
	}
	st := storetest.Open(tb, url)
	path := filepath.Join(tb.TempDir(), "policy.json")
	if err := os.WriteFile(path, []byte(policyText), 0o600); err != nil {
		tb.Fatal(err)
	}
	pol, err := policy.Load(path)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(requireToken(mcpHandler()))
	tb.Cleanup(srv.Close)
	servers := []agents.MCPServer{{Name: "kb", URL: srv.URL, CredentialEnv: "TF_TEST_MCP_TOKEN"}}
	plain := mcptools.New(servers, mcptools.Options{Getenv: getenv, Credentials: operator, User: "alice", Owner: "ops", Agent: "bench"})
	tb.Cleanup(plain.Close)
	governed := mcptools.New(servers, mcptools.Options{Getenv: getenv, Credentials: operator, User: "alice", Owner: "ops", Agent: "bench",
		Policy: pol, Approver: &approvals.Gate{Store: st}, Budgets: &budgets.Meter{Store: st, Policy: pol}})
	tb.Cleanup(governed.Close)
	return st, plain, governed
}

// gatePolicy holds pull requests for approval (a rule this call does not match, so the
// call is decided past it) and counts every call against a per-user daily budget: the
// work a call that needs no approval pays for approvals and budgets.
const gatePolicy = `{
  "rules": [
    {"effect": "approve", "tools": ["create_pull_request"], "approvers": ["$caller"], "timeout": "10m"},
    {"effect": "allow"}
  ],
  "default": "deny",
  "budgets": [{"name": "calls_per_user", "per": ["user"], "window": "per_day", "calls": 100000000}]
}`

// What approvals and budgets add to an MCP call that needs no approval:
// BenchmarkGate makes the same call to a real MCP server on loopback through a toolset
// without a policy (the baseline) and through one with gatePolicy, whose budget is
// charged in the control-plane database (SQLite, then PostgreSQL), interleaved in each
// iteration, and once more with a budget that does not count this call (no-budget: the
// policy's rules alone). Reported: the p50 of each, the p50 added (target: 0.2 ms or less), the
// statements the store ran per governed call (target on PostgreSQL: 1), and the p50 of
// that one statement alone (the budget's charge, a durable write): the floor of what a
// budget shared through the database can add.
func BenchmarkGate(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres", "no-budget"} {
		b.Run(db, func(b *testing.B) {
			text := gatePolicy
			if db == "no-budget" {
				// The policy's rules alone (the approve rule this call does not
				// match): what the gate costs a call that no budget counts.
				text = strings.Replace(gatePolicy, `"calls": 100000000`, `"calls": 100000000, "tools": ["create_pull_request"]`, 1)
			}
			st, plain, governed := gated(b, db, text)
			ctx := context.Background()
			args := map[string]any{"q": "x"}
			call := func(ts *mcptools.Toolset) time.Duration {
				t := time.Now()
				if _, err := ts.CallValue(ctx, mcptools.Origin{SessionID: "s-bench"}, "kb__lookup", args); err != nil {
					b.Fatal(err)
				}
				return time.Since(t)
			}
			plain.Descriptors(ctx)
			governed.Descriptors(ctx)
			call(plain)
			call(governed)
			// The floor: the budget's one statement alone, as the store runs it for
			// every governed call (another counter, so the calls' is not touched).
			charge := func() time.Duration {
				t := time.Now()
				if _, ok, err := st.ChargeBudget(ctx, store.BudgetCharge{Budget: "floor", Key: "user=alice", User: "alice",
					Calls: 1, Limits: store.BudgetLimits{Calls: 1 << 40}, Check: true}); err != nil || !ok {
					b.Fatal(ok, err)
				}
				return time.Since(t)
			}
			var base, gated, floor []float64
			var statements int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				base = append(base, call(plain).Seconds())
				q := st.Queries()
				gated = append(gated, call(governed).Seconds())
				statements += st.Queries() - q
				floor = append(floor, charge().Seconds())
			}
			b.StopTimer()
			p50 := func(v []float64) float64 {
				s := slices.Clone(v)
				slices.Sort(s)
				return s[len(s)/2] * 1e3
			}
			b.ReportMetric(p50(base), "plain-p50-ms")
			b.ReportMetric(p50(gated), "gated-p50-ms")
			b.ReportMetric(p50(gated)-p50(base), "added-p50-ms")
			b.ReportMetric(p50(floor), "charge-p50-ms")
			b.ReportMetric(float64(statements)/float64(b.N), "statements/call")
		})
	}
}

// A call that needs no approval costs the store one statement: the budget's charge (on
// PostgreSQL, where each statement is a round trip, the bound).
func TestGateChargesOneStatementPerCall(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			st, _, ts := gated(t, db, gatePolicy)
			ctx := context.Background()
			ts.Descriptors(ctx)
			before := st.Queries()
			for range 5 {
				if _, err := ts.CallValue(ctx, mcptools.Origin{SessionID: "s-1"}, "kb__lookup", map[string]any{"q": "x"}); err != nil {
					t.Fatal(err)
				}
			}
			if n := st.Queries() - before; n != 5 {
				t.Fatalf("5 governed calls ran %d statements; want 5 (one budget charge each)", n)
			}
			usage, err := st.ListBudgetUsage(ctx, store.BudgetFilter{User: "alice"})
			if err != nil || len(usage) != 1 || usage[0].Calls != 5 {
				t.Fatalf("usage %+v, %v; want one counter of alice's at 5 calls", usage, err)
			}
		})
	}
}
