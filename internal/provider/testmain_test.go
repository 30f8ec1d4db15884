package provider

import (
	"os"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
)

// TestMain lets the test binary be what the local backend re-executes: the acceptance
// tests serve the provider in process, so its snapshot builds and sandboxes run this
// binary as their setup step, build shim, unshift step and init (see backends.ReexecMain).
// It stops the PostgreSQL cluster that tests on PostgreSQL started (pgtest.Get).
func TestMain(m *testing.M) {
	backends.ReexecMain()
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}
