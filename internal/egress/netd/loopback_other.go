//go:build !linux

package netd

// LoopbackUp does nothing outside Linux.
func LoopbackUp() error { return nil }

// PrepareNamespace does nothing outside Linux.
func PrepareNamespace() error { return nil }
