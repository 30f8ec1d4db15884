//go:build linux

package local

import (
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
)

// TestConformance runs the runtime conformance suite against the local runtime.
func TestConformance(t *testing.T) {
	t.Parallel()
	sandboxtest.RunRuntimeTests(t, func(t *testing.T) sandboxtest.Fixture {
		r, rel := newTestRuntime(t)
		return sandboxtest.Fixture{Runtime: r, Snapshot: rel, Capabilities: NewBackend().Info().Capabilities,
			Lose: func(t *testing.T, id string) {
				// The keeper's whole process group, as a crash or the OOM killer would.
				pid, _, alive := r.keeperAlive(id)
				if !alive {
					t.Fatalf("sandbox %s has no keeper", id)
				}
				ns := sandboxPidNS(pid)
				if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				if err := waitPidNSEmpty(t.Context(), ns, 10*time.Second); err != nil {
					t.Fatal(err)
				}
			}}
	})
}
