package provider

import "github.com/trueforge/terraform-provider-trueforge/internal/agentspec"

// agentBound is the range agentspec.Bounds gives an agent attribute, for its schema
// validator: the provider's plan check and the harness's check of the specs it reads
// (agentspec.Spec.CheckBounds) take their numbers from the same table, so they cannot
// drift apart.
func agentBound(field string) (lo, hi int64) {
	for _, b := range agentspec.Bounds() {
		if b.Field == field {
			return b.Min, b.Max
		}
	}
	panic("agentspec.Bounds has no bound for " + field) // a typo here fails every provider test
}
