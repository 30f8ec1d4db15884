//go:build linux

package local

// LimitsRequired reports whether SetRequireLimits is on: whether Create refuses a
// sandbox whose limits would not all be enforced.
func (r *Runtime) LimitsRequired() bool { return r.limits.require.Load() }
