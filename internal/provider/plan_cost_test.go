package provider

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// maxPlanQueries is what a no-op plan may cost a provider process in statements sent to
// the control-plane database, whatever the number of resources (issue 13: at most 10).
const maxPlanQueries = 10

// planCostHCL is n environments, each with a secret, an agent and a volume of its own,
// and every setting an environment has.
func planCostHCL(n int) string {
	return fmt.Sprintf(`
resource "trueforge_volume" "data" {
  count            = %[1]d
  name             = "data-${count.index}"
  sandbox_provider = trueforge_sandbox_provider.local.name
}

resource "trueforge_environment" "env" {
  count            = %[1]d
  name             = "env-${count.index}"
  sandbox_provider = trueforge_sandbox_provider.local.name
  build_script     = "echo cost"
  env              = { INDEX = tostring(count.index) }
  labels           = { team = "t-${count.index}" }
  volumes          = [{ volume = trueforge_volume.data[count.index].name, mount_path = "/data" }]
  network = {
    allow_domains   = ["api.example.com"]
    allow_cidrs     = ["192.30.252.0/22"]
    package_indexes = ["pypi"]
  }
}

resource "trueforge_secret" "tok" {
  count       = %[1]d
  environment = trueforge_environment.env[count.index].name
  env_name    = "TOKEN"
  value       = "v-${count.index}"
  hosts       = ["api.example.com"]
}

resource "trueforge_agent" "agent" {
  count        = %[1]d
  name         = "agent-${count.index}"
  instructions = "Agent ${count.index}."
  model        = { provider = "scripted", script = jsonencode({ turns = [] }) }
  sandbox      = { enabled = true, environment = trueforge_environment.env[count.index].name }
}
`, n)
}

// A no-op plan on PostgreSQL costs a few queries, not one or more per resource: the
// provider reads the control plane once (the store's config cache) and every refresh
// and plan of 81 resources is served from that read. Every provider process of the plan
// steps (plan, refresh, plan again) stays within maxPlanQueries; the same plan without
// the cache costs several queries per resource.
func TestAccPlanCost_postgresNoOpPlan(t *testing.T) {
	f := newPGFixture(t)
	const n = 20
	log := filepath.Join(t.TempDir(), "queries.log")
	t.Setenv(store.QueryLogEnv, log)
	cfg := f.config(planCostHCL(n))
	var totals map[string]int64 // the plan step's, read before the destroy adds its own
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{Config: cfg},
			{
				Config:   cfg,
				PlanOnly: true,
				PreConfig: func() {
					if err := os.Truncate(log, 0); err != nil {
						t.Fatal(err)
					}
				},
			},
			{Config: cfg, PlanOnly: true, PreConfig: func() { totals = queryTotals(t, log) }},
		},
	})
	if len(totals) == 0 {
		t.Fatal("no provider process of the plan step opened the store: nothing was measured")
	}
	for id, q := range totals {
		if q > maxPlanQueries {
			t.Errorf("a provider process (store %s) spent %d queries on a no-op plan of %d resources; want at most %d", id, q, 4*n+1, maxPlanQueries)
		}
	}
	t.Logf("queries per provider process of the no-op plans of %d resources: %v", 4*n+1, totals)
}

// queryTotals reads a store.QueryLogEnv file: each store's last count.
func queryTotals(t *testing.T, path string) map[string]int64 {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	totals := map[string]int64{}
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		id, count, ok := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseInt(count, 10, 64)
		if !ok || err != nil {
			t.Fatalf("query log line %q", sc.Text())
		}
		totals[id] = max(totals[id], n)
	}
	return totals
}
