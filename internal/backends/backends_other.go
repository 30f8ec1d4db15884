//go:build !linux

package backends

// addPlatformBackends adds nothing here: the local backend runs only on Linux, so on
// other systems the provider serves the remote backends (daytona), for plans and applies
// against a shared control plane.
func addPlatformBackends(Registry) {}

// ReexecMain does nothing: only the local backend re-executes its binary.
func ReexecMain() {}
