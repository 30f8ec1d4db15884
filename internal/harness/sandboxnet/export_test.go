package sandboxnet

import "github.com/trueforge/terraform-provider-trueforge/internal/egress"

// SecretSource exposes the store-backed secret source to the benchmarks and tests.
func (x *Proxies) SecretSource(sessionID, environment string) egress.SecretSource {
	return x.secretSource(sessionID, environment)
}
