//go:build linux

package local

import (
	"os"
	"strings"
)

// mountEntry is a line of /proc/self/mountinfo: where, what file system, from what.
type mountEntry struct{ Point, FSType, Source string }

// readMounts lists this thread's mounts in mountinfo's order (a later mount at a point
// hides an earlier one). The thread's: a keeper makes its mount namespace on one thread
// (spare.go), and /proc/self would show the main thread's.
func readMounts() ([]mountEntry, error) {
	data, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []mountEntry
	for _, line := range strings.Split(string(data), "\n") {
		// id parent major:minor root mountpoint options [optional...] - fstype source super
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 2 {
			continue
		}
		out = append(out, mountEntry{Point: unescapeMount(f[4]), FSType: g[0], Source: unescapeMount(g[1])})
	}
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')*64 + (s[i+2]-'0')*8 + (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
