package daytona_test

import (
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
)

// TestConformance runs the runtime conformance suite against the Daytona runtime on the
// emulator, whose sandboxes are real local bubblewrap sandboxes.
func TestConformance(t *testing.T) {
	t.Parallel()
	sandboxtest.RunRuntimeTests(t, func(t *testing.T) sandboxtest.Fixture {
		// Transitions take time, as on Daytona, so that lifecycle calls race them.
		srv, c, rt, snap := newRuntime(t, transitionDelays(30*time.Millisecond)...)
		// Commands run as session commands, whose logs keep stdout and stderr apart.
		return sandboxtest.Fixture{Runtime: rt, Snapshot: snap, Capabilities: daytona.NewBackend().Info().Capabilities,
			// A sandbox's container killed (a crash, the OOM killer): Daytona then reports
			// it stopped, its files kept.
			Lose: func(t *testing.T, id string) {
				if !srv.KillContainer(id) {
					t.Fatalf("sandbox %s is not started in the emulator", id)
				}
			},
			Secret: func(t *testing.T, environment, envName, value string) string {
				name := daytona.SecretName(environment, envName)
				if _, err := c.CreateSecret(testCtx(t), daytona.CreateSecretRequest{Name: name, Value: value, Hosts: []string{"api.example.com"}}); err != nil {
					t.Fatal(err)
				}
				return name
			}}
	})
}
