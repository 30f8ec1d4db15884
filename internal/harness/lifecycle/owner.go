package lifecycle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcessOwner names this process as "host:pid:start": host is the hostname and, after
// a "~", a short hash of the kernel's boot id and this process's pid namespace (its pid
// space); start is the process's start time in clock ticks since boot, so a reused pid
// is not mistaken for a live owner.
//
// The pid space is part of the name because a pid means something only inside its
// namespace: two harness replicas in two containers may share a hostname (host
// networking, a fixed hostname) but not their pids, and a replica that checked the
// other's pid in its own namespace would find it dead and take over a live run.
func ProcessOwner() string {
	pid := os.Getpid()
	return fmt.Sprintf("%s:%d:%d", pidSpace(), pid, startTime(pid))
}

// pidSpace is "hostname~hash": the pids of two processes with the same pidSpace are
// comparable, and only those.
func pidSpace() string {
	host, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, _ := os.Readlink("/proc/self/ns/pid")
	sum := sha256.Sum256([]byte(strings.TrimSpace(string(boot)) + "\x00" + ns))
	return host + "~" + hex.EncodeToString(sum[:4])
}

// OwnerAlive reports whether the process named by owner still runs. An owner in
// another pid space (another machine, container or boot) is assumed alive: it cannot
// be checked from here, and only its heartbeats (a run's, a lease's) tell when it died.
func OwnerAlive(owner string) bool {
	parts := strings.Split(owner, ":")
	if len(parts) != 3 {
		return false
	}
	if parts[0] != pidSpace() {
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
