//go:build linux

package daytonatest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killTree sends SIGKILL to every host process whose argv holds marker and to all their
// descendants, as the daemon's session DELETE signals the session's process tree
// (apps/daemon/pkg/session/delete.go, v0.190: signalProcessTree walks the children of
// the session shell, reaching processes that left its process group with setsid). The
// emulator's sandboxes run their commands as host processes, so the host's /proc shows
// the tree whatever namespaces it is in. It returns the pids it signalled, for
// waitGone.
func killTree(marker string) []int {
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
	pids := make([]int, 0, len(seen))
	for pid := range seen {
		pids = append(pids, pid)
	}
	return pids
}

// waitGone waits until each of pids has exited (gone from /proc, or a zombie no
// longer running) or until deadline, polling every few milliseconds, as the daemon's
// waitForTermination (apps/daemon/pkg/session/delete.go:115-142, v0.190) polls until
// the session's shell has no children before DELETE answers. A SIGKILL is delivered
// asynchronously: on a busy machine the killed process runs on for a moment, and a
// DELETE that answered at once would let a caller see it still running.
func waitGone(pids []int, deadline time.Time) {
	for _, pid := range pids {
		for running(pid) && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// running tells whether pid exists and is not a zombie (Z) or dead (X).
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	state := stat[i+2]
	return state != 'Z' && state != 'X'
}
