package sandboxnet

import "github.com/trueforge/terraform-provider-trueforge/internal/egress"

// SecretSource exposes the store-backed secret source to the benchmarks.
func (x *Proxies) SecretSource(environment string) egress.SecretSource {
	return x.secretSource(environment)
}
