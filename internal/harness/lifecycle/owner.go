package lifecycle

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcessOwner names this process as "host:pid:start", start being its start time in
// clock ticks since boot, so a reused pid is not mistaken for a live owner.
func ProcessOwner() string {
	host, _ := os.Hostname()
	pid := os.Getpid()
	return fmt.Sprintf("%s:%d:%d", host, pid, startTime(pid))
}

// OwnerAlive reports whether the process named by owner still runs. An owner on another
// host is assumed alive: it cannot be checked from here.
func OwnerAlive(owner string) bool {
	parts := strings.Split(owner, ":")
	if len(parts) != 3 {
		return false
	}
	host, _ := os.Hostname()
	if parts[0] != host {
		return true
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil {
		return false
	}
	start, _ := strconv.ParseUint(parts[2], 10, 64)
	st := startTime(pid)
	return st != 0 && st == start
}

// startTime is field 22 of /proc/<pid>/stat; 0 when the process does not exist.
func startTime(pid int) uint64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return 0
	}
	// fields[0] is field 3 (state); field 22 is fields[19].
	if fields[0] == "Z" || fields[0] == "X" {
		return 0
	}
	v, _ := strconv.ParseUint(fields[19], 10, 64)
	return v
}
