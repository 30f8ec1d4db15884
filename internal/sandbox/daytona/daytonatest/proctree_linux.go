//go:build linux

package daytonatest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// killTree sends SIGKILL to every host process whose argv holds marker and to all their
// descendants, as the daemon's session DELETE signals the session's process tree
// (apps/daemon/pkg/session/delete.go, v0.190: signalProcessTree walks the children of
// the session shell, reaching processes that left its process group with setsid). The
// emulator's sandboxes run their commands as host processes, so the host's /proc shows
// the tree whatever namespaces it is in.
func killTree(marker string) {
	children := map[int][]int{}
	var roots []int
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range paths {
		dir := filepath.Dir(p)
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		// The fields after the command name, which may hold spaces and parentheses:
		// state, then the parent's pid.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
		if cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil && bytes.Contains(cmdline, []byte(marker)) {
			roots = append(roots, pid)
		}
	}
	seen := map[int]bool{}
	var walk func(pid int)
	walk = func(pid int) {
		if seen[pid] {
			return
		}
		seen[pid] = true
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for _, c := range children[pid] {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}
}
