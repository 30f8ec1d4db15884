//go:build linux

package local

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// TestConcurrentSandboxes runs 50 sandboxes at once, each running 20 execs (some of them
// concurrently within the sandbox), then stops them all: every exec must succeed with
// its own output, and no stopped sandbox may hold a process.
func TestConcurrentSandboxes(t *testing.T) {
	t.Parallel()
	const sandboxes, execs = 50, 20
	r, rel := newTestRuntime(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, sandboxes*execs)
	start := time.Now()
	for i := 0; i < sandboxes; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := "c" + strconv.Itoa(i)
			if err := r.Create(ctx, sandbox.CreateRequest{ID: id, SnapshotID: rel}); err != nil {
				errs <- err
				return
			}
			var inner sync.WaitGroup
			for j := 0; j < execs; j++ {
				run := func() {
					want := fmt.Sprintf("%s-%d", id, j)
					res, err := r.Exec(ctx, id, sandbox.ExecRequest{Shell: "echo " + want + " >> log; echo " + want, Timeout: time.Minute})
					switch {
					case err != nil:
						errs <- fmt.Errorf("%s exec %d: %w", id, j, err)
					case res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != want:
						errs <- fmt.Errorf("%s exec %d: exit %d stdout %q stderr %q", id, j, res.ExitCode, res.Stdout, res.Stderr)
					}
				}
				if j%4 == 0 { // a quarter of them overlap with the next ones
					inner.Add(1)
					go func() { defer inner.Done(); run() }()
				} else {
					run()
				}
			}
			inner.Wait()
			if got := mustLines(r, id); got != execs {
				errs <- fmt.Errorf("%s: %d lines logged, want %d", id, got, execs)
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 10 {
			t.Error(err)
		}
	}
	if n > 0 {
		t.Fatalf("%d errors", n)
	}
	t.Logf("%d sandboxes x %d execs in %s", sandboxes, execs, time.Since(start))
	for i := 0; i < sandboxes; i++ {
		id := "c" + strconv.Itoa(i)
		pid, _, _ := r.keeperAlive(id)
		ns := sandboxPidNS(pid)
		if err := r.Stop(ctx, id); err != nil {
			t.Fatal(err)
		}
		if keeperRuns(r, id) || (ns != "" && len(killPidNS(ns)) > 0) {
			t.Fatalf("stopped sandbox %s still has processes", id)
		}
	}
}

func mustLines(r *Runtime, id string) int {
	data, err := r.ReadFile(context.Background(), id, "log", 0)
	if err != nil {
		return -1
	}
	return strings.Count(string(data), "\n")
}
