package egress

import (
	"syscall"
	"time"
)

// ProcessCPU is this process's user and system CPU time so far (client, netd, proxy and
// upstream of the benchmarks all run in it; a load generator does not).
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
