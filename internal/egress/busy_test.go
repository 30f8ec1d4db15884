package egress_test

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The CPU load the loaded benchmarks run beside them: this test binary re-executed with
// busyEnv set to a duration spins that many loops (busyLoops, one per core of this
// 2-core machine) until the duration passes or the benchmark kills it, whichever comes
// first, so a load never outlives its benchmark by more than the bound.
const (
	busyEnv   = "EGRESS_BENCH_BUSY"
	busyLoops = 2
	busyBound = 10 * time.Minute
)

// busy is the re-executed load: busyLoops goroutines spinning until d has passed.
func busy(d string) int {
	dur, err := time.ParseDuration(d)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: %v\n", busyEnv, d, err)
		return 2
	}
	end := time.Now().Add(dur)
	var spins atomic.Int64
	var wg sync.WaitGroup
	for range busyLoops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				for range 1 << 16 {
					spins.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return 0
}

// startLoad runs the load until the benchmark ends (or busyBound passes).
func startLoad(b *testing.B) {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run", "^$")
	cmd.Env = append(os.Environ(), busyEnv+"="+busyBound.String(), fmt.Sprintf("GOMAXPROCS=%d", busyLoops))
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting the CPU load: %v", err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}
