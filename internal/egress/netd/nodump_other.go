//go:build !linux

package netd

// NotDumpable does nothing outside Linux.
func NotDumpable() error { return nil }
