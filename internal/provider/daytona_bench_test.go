package provider

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// benchT lets a benchmark drive terraform-plugin-testing, which wants Parallel.
type benchT struct{ *testing.B }

func (benchT) Parallel() {}

// BenchmarkDaytonaPlan measures `terraform plan` (refresh included) on a control plane with
// N environments on the Daytona emulator, each with its own snapshot and one secret, and
// counts the Daytona API requests each plan makes. It fails when a no-op plan writes
// anything or reads more than once per resource.
//
//	requests/plan  every API request of one plan
//	reads/resource requests per managed resource (1 provider + N environments + N secrets)
//	writes/plan    POST, PUT, PATCH and DELETE requests (must be 0)
//
// The "429" variants inject three 429s (Retry-After: 1 s) into every plan's snapshot
// reads: their requests/plan is 3 higher and their time shows the server-requested wait,
// against the clean variant of the same size as the baseline.
func BenchmarkDaytonaPlan(b *testing.B) {
	for _, n := range []int{10, 40} {
		for _, faults := range []int{0, 3} {
			name := fmt.Sprintf("envs=%d", n)
			if faults > 0 {
				name += fmt.Sprintf("/429x%d", faults)
			}
			b.Run(name, func(b *testing.B) { benchDaytonaPlan(b, n, faults) })
		}
	}
}

func benchDaytonaPlan(b *testing.B, n, faults int) {
	f := newDaytonaFixture(b)
	var body strings.Builder
	for i := range n {
		name := fmt.Sprintf("e%d", i)
		body.WriteString(daytonaEnvHCL(name, fmt.Sprintf("echo %d > /etc/bench", i), `  env = { MODE = "bench" }`))
		fmt.Fprintf(&body, `
resource "trueforge_secret" %[1]q {
  environment = trueforge_environment.%[1]s.name
  env_name    = "TOKEN"
  hosts       = ["api.example.com"]
  value       = "secret-%[1]s"
}
`, name)
	}
	cfg := f.config(body.String())
	resources := 1 + 2*n

	var total, writes, reads, plans int
	record := func() {
		counts := f.srv.Counts()
		f.srv.ResetCounts()
		sum, w := 0, 0
		for route, c := range counts {
			sum += c
			if !strings.HasPrefix(route, "GET ") {
				w += c
			}
		}
		if w > 0 {
			b.Fatalf("a no-op plan wrote to Daytona: %v", counts)
		}
		if most := resources + faults; sum > most {
			b.Fatalf("a plan made %d requests for %d resources (+%d injected faults): %v", sum, resources, faults, counts)
		}
		total, writes, reads, plans = total+sum, writes+w, reads+sum-faults, plans+1
	}
	steps := []resource.TestStep{{Config: cfg}}
	for i := 0; i <= b.N; i++ {
		steps = append(steps, resource.TestStep{
			Config:   cfg,
			PlanOnly: true,
			PreConfig: func() {
				switch i {
				case 0:
					b.ResetTimer()
				default:
					record()
				}
				if i == b.N {
					b.StopTimer()
				}
				f.srv.ResetCounts()
				if faults > 0 {
					f.srv.InjectFaults("GET /snapshots/{id}", faults, 429)
				}
			},
		})
	}
	resource.UnitTest(benchT{b}, resource.TestCase{ProtoV6ProviderFactories: f.providers, Steps: steps})
	if plans == 0 {
		b.Fatal("no plan was measured")
	}
	b.ReportMetric(float64(total)/float64(plans), "requests/plan")
	b.ReportMetric(float64(reads)/float64(plans)/float64(resources), "reads/resource")
	b.ReportMetric(float64(writes)/float64(plans), "writes/plan")
}
