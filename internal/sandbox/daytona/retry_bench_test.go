package daytona_test

import (
	"context"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// BenchmarkClientRetry measures one GET /snapshots/{id} through the client's retry policy:
// clean (the baseline), after one 429 carrying Retry-After: 1 s (the client must wait
// what the server asks, so about 1 s more), and after three 503s (the policy's jittered
// backoff, 500 ms base). requests/op counts what reached the server.
func BenchmarkClientRetry(b *testing.B) {
	for _, bc := range []struct {
		name   string
		status int
		n      int
	}{{"clean", 0, 0}, {"429x1", 429, 1}, {"503x3", 503, 3}} {
		b.Run(bc.name, func(b *testing.B) {
			srv, _ := setup(b)
			c := daytona.New(srv.URL(), "dtn_test_default") // the default policy, as shipped
			ctx := context.Background()
			id := readySnapshot(b, ctx, newClient(b, srv, "dtn_test_default"), "true")
			srv.ResetCounts()
			b.ResetTimer()
			for b.Loop() {
				if bc.n > 0 {
					srv.InjectFaults("GET /snapshots/{id}", bc.n, bc.status)
				}
				if _, err := c.GetSnapshot(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(srv.Count("GET /snapshots/{id}"))/float64(b.N), "requests/op")
		})
	}
}
