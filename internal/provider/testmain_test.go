package provider

import (
	"os"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
)

// TestMain lets the test binary be what the local backend re-executes: the acceptance
// tests serve the provider in process, so its snapshot builds and sandboxes run this
// binary as their setup step, build shim, unshift step and init (see backends.ReexecMain).
func TestMain(m *testing.M) {
	backends.ReexecMain()
	os.Exit(m.Run())
}
