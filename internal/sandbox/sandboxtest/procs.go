package sandboxtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ProcessesWith lists the pids of this machine's processes whose command line contains
// marker: how a test finds the helpers and sandbox processes a backend left running.
func ProcessesWith(marker string) []string {
	var pids []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && strings.Contains(strings.ReplaceAll(string(data), "\x00", " "), marker) {
			pids = append(pids, filepath.Base(d))
		}
	}
	return pids
}

// WaitFor polls cond until it holds, failing tb (naming what it waited for) when it
// still does not after limit: for what another process does in its own time.
func WaitFor(tb testing.TB, what string, limit time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
