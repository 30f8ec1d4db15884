//go:build !linux

package daytonatest

import "time"

// killTree is the Linux emulator's walk of a session's process tree; elsewhere a
// session's DELETE kills each command's process group only.
func killTree(string) []int { return nil }

// waitGone has nothing to wait for where killTree signals nothing.
func waitGone([]int, time.Time) {}
