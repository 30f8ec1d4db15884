package local

import "os"

// DefaultRequireLimits is what a sandbox provider's unset require_limits means for this
// process: required when it runs as root (a root runtime has cgroups on any ordinary
// host, so a limit it cannot enforce is a misconfiguration worth refusing), not
// required otherwise (an ordinary user without a delegated cgroup runs sandboxes with
// the limits that can be enforced, as rootless container engines do).
func DefaultRequireLimits() bool { return os.Geteuid() == 0 }

// RequireLimitsFor resolves a sandbox provider's require_limits setting: the setting
// when there is one, else DefaultRequireLimits.
func RequireLimitsFor(setting *bool) bool {
	if setting != nil {
		return *setting
	}
	return DefaultRequireLimits()
}
