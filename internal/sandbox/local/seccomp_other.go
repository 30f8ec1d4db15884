//go:build linux && !amd64 && !arm64

package local

// No syscall table for this architecture: sandboxes run without a seccomp filter.
var seccompArchTable seccompArch
