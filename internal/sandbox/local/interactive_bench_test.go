//go:build linux

package local

import (
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
)

// BenchmarkInteractiveRoundTrip: a line to an interactive command's stdin and its
// answer on stdout (pipes into the sandbox, no polling); compare with the Daytona
// runtime's BenchmarkInteractiveRoundTrip on the emulator.
func BenchmarkInteractiveRoundTrip(b *testing.B) {
	r, rel := newTestRuntime(b)
	create(b, r, sandbox.CreateRequest{ID: "inter", SnapshotID: rel})
	sandboxtest.BenchInteractive(b, r, "inter")
}
