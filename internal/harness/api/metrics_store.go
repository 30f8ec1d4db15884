package api

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Limits of the gauges read from the store at each scrape.
const (
	// storeScrapeTimeout bounds the store's queries of one scrape; past it the gauges
	// are left out of that scrape (and the failure logged), the rest is served.
	storeScrapeTimeout = 2 * time.Second
	// budgetCountersPerScrape bounds the budget counters one scrape reads
	// (store.BudgetTotals): those whose windows end soonest.
	budgetCountersPerScrape = 10000
)

// storeGauges is the collector of the warm pool and budget gauges. They are read from
// the store when Prometheus scrapes, not kept in this process, so every replica
// reports the same values (take one replica's, or max, not a sum). A scrape costs
// three statements of bounded cost: the pool members grouped by environment and state
// (as many rows as the pools' sizes allow), the environments (the config cache's, on a
// warm cache no statement), and one aggregate of at most budgetCountersPerScrape open
// budget counters.
type storeGauges struct {
	store   *store.Store
	budgets func() []policy.Budget // declared budgets, for their limits; nil: none

	poolMembers, poolSize                              *prometheus.Desc
	budgetLimit, budgetCounters, budgetMax, budgetUsed *prometheus.Desc
}

func newStoreGauges(st *store.Store, budgets func() []policy.Budget) *storeGauges {
	return &storeGauges{store: st, budgets: budgets,
		poolMembers: prometheus.NewDesc("trueforge_pool_members",
			"Members of each environment's warm pool, by state (creating, ready); a claimed member leaves its pool.",
			[]string{"environment", "state"}, nil),
		poolSize: prometheus.NewDesc("trueforge_pool_size",
			"The warm pool size each environment declares (environments with a pool).",
			[]string{"environment"}, nil),
		budgetLimit: prometheus.NewDesc("trueforge_budget_limit",
			"Each declared budget's limit per counter and window, by dimension (calls, result_bytes, tokens, sandbox_seconds; limited dimensions only).",
			[]string{"budget", "dimension"}, nil),
		budgetCounters: prometheus.NewDesc("trueforge_budget_counters",
			"Counters of each budget in an open time window (per_day, every): one per user, agent or owner it is kept per.",
			[]string{"budget"}, nil),
		budgetMax: prometheus.NewDesc("trueforge_budget_used_max",
			"The most any one counter of each budget spent in its open window, by dimension: compare with trueforge_budget_limit.",
			[]string{"budget", "dimension"}, nil),
		budgetUsed: prometheus.NewDesc("trueforge_budget_used",
			"What all counters of each budget spent together in their open windows, by dimension.",
			[]string{"budget", "dimension"}, nil),
	}
}

// Describe sends every gauge's description (a checked collector).
func (g *storeGauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{g.poolMembers, g.poolSize, g.budgetLimit, g.budgetCounters, g.budgetMax, g.budgetUsed} {
		ch <- d
	}
}

// Collect reads the gauges from the store. A failed query sends an invalid metric,
// which the handler logs, leaving that query's gauges out of the scrape.
func (g *storeGauges) Collect(ch chan<- prometheus.Metric) {
	if g.store == nil {
		return // a server without a store (none is configured so) has no gauges to read
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeScrapeTimeout)
	defer cancel()
	g.collectPools(ctx, ch)
	g.collectBudgets(ctx, ch)
}

func (g *storeGauges) collectPools(ctx context.Context, ch chan<- prometheus.Metric) {
	counts, err := g.store.PoolCounts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(g.poolMembers, err)
	}
	for _, c := range counts {
		ch <- prometheus.MustNewConstMetric(g.poolMembers, prometheus.GaugeValue, float64(c.Members), c.Environment, c.State)
	}
	envs, err := g.store.ListEnvironments(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(g.poolSize, err)
	}
	for _, e := range envs {
		if wp := e.Settings.WarmPool; wp != nil && wp.Size > 0 {
			ch <- prometheus.MustNewConstMetric(g.poolSize, prometheus.GaugeValue, float64(wp.Size), e.Name)
		}
	}
}

func (g *storeGauges) collectBudgets(ctx context.Context, ch chan<- prometheus.Metric) {
	if g.budgets != nil {
		for _, b := range g.budgets() {
			for dim, v := range budgetDims(store.BudgetLimits{Calls: b.Calls, Bytes: b.ResultBytes, Tokens: b.Tokens, SandboxMS: b.SandboxSeconds * 1000}) {
				if v > 0 {
					ch <- prometheus.MustNewConstMetric(g.budgetLimit, prometheus.GaugeValue, v, b.Name, dim)
				}
			}
		}
	}
	totals, err := g.store.BudgetTotals(ctx, time.Now(), budgetCountersPerScrape)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(g.budgetCounters, err)
	}
	for _, t := range totals {
		ch <- prometheus.MustNewConstMetric(g.budgetCounters, prometheus.GaugeValue, float64(t.Counters), t.Budget)
		for dim, v := range budgetDims(t.Max) {
			ch <- prometheus.MustNewConstMetric(g.budgetMax, prometheus.GaugeValue, v, t.Budget, dim)
		}
		for dim, v := range budgetDims(t.Sum) {
			ch <- prometheus.MustNewConstMetric(g.budgetUsed, prometheus.GaugeValue, v, t.Budget, dim)
		}
	}
}

// budgetDims names l's amounts by the dimension names budgets' refusals use, sandbox
// time in seconds.
func budgetDims(l store.BudgetLimits) map[string]float64 {
	return map[string]float64{
		"calls": float64(l.Calls), "result_bytes": float64(l.Bytes), "tokens": float64(l.Tokens),
		"sandbox_seconds": float64(l.SandboxMS) / 1000,
	}
}
