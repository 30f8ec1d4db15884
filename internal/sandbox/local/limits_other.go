//go:build !linux

package local

import "github.com/trueforge/terraform-provider-trueforge/internal/sandbox"

// ProbeLimits: local sandboxes need Linux, so none of their limits is enforced here.
func ProbeLimits(lim sandbox.Limits) []sandbox.UnenforcedLimit {
	var out []sandbox.UnenforcedLimit
	for _, f := range []struct {
		name string
		v    int64
	}{{"cpu", lim.CPU}, {"memory", lim.MemoryMB}, {"pids", lim.Pids}, {"disk", lim.DiskMB}} {
		if f.v > 0 {
			out = append(out, sandbox.UnenforcedLimit{Limit: f.name, Reason: "local sandboxes need Linux"})
		}
	}
	return out
}
