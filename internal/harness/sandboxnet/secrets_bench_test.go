package sandboxnet_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sandboxnet"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// BenchmarkSecretSource measures what the proxy pays for each request that carries a
// placeholder (and each TLS CONNECT of a sandbox with secrets): the store-backed source
// reads the environment's secrets from the control-plane database and opens each with the
// secret box, which is what makes a rotation apply to the next request. The baseline is
// a source that returns the same secrets from memory, as internal/egress's benchmarks use.
func BenchmarkSecretSource(b *testing.B) {
	for _, n := range []int{1, 10} {
		st, env, box := fixture(b)
		ctx := context.Background()
		// fixture made one secret; add the rest.
		for i := 1; i < n; i++ {
			id := fmt.Sprintf("%s/TOKEN_%d", env.Name, i)
			sealed, err := box.Seal([]byte(fmt.Sprintf("value-%d", i)), "secret/"+id)
			if err != nil {
				b.Fatal(err)
			}
			if err := st.CreateSecret(ctx, store.Secret{ID: id, Environment: env.Name, EnvName: fmt.Sprintf("TOKEN_%d", i),
				Hosts: []string{"api.example.com"}, ValueEnc: sealed}); err != nil {
				b.Fatal(err)
			}
		}
		x := sandboxnet.New(sandboxnet.Config{Store: st, Dir: b.TempDir(), Helper: fakeHelper(b)})
		fromStore := x.SecretSource("s-1", env.Name)
		want, err := fromStore(ctx)
		if err != nil || len(want) != n {
			b.Fatalf("store source: %d secrets, %v; want %d", len(want), err, n)
		}
		fromMemory := egress.SecretSource(func(context.Context) ([]egress.Secret, error) {
			return append([]egress.Secret(nil), want...), nil
		})
		for _, src := range []struct {
			name string
			fn   egress.SecretSource
		}{{"memory", fromMemory}, {"store", fromStore}} {
			b.Run(fmt.Sprintf("secrets=%d/%s", n, src.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := src.fn(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
