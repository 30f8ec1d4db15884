package daytona_test

import (
	"os"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/local"
)

// TestMain lets the test binary be what the local backend re-executes: daytonatest, the
// emulator, runs its sandboxes and builds on the local backend, which runs this binary as
// their setup step, build shim, unshift step and init (see local.ReexecMain).
func TestMain(m *testing.M) {
	local.ReexecMain()
	os.Exit(m.Run())
}
