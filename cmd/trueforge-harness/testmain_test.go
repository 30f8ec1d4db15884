package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sandboxnet"
	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
)

// TestMain builds the harness static once, as the netd helper of the tests' local
// sandboxes (the in-process CLI's own test binary is not static). Before anything, it
// lets this binary be what the local backend re-executes (setup step, build shim,
// unshift step, init), as main does.
func TestMain(m *testing.M) {
	backends.ReexecMain()
	dir, err := os.MkdirTemp("", "tfh-netd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin, err := harnesstest.BuildStaticHarness(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	os.Setenv(sandboxnet.HelperEnv, bin)
	code := m.Run()
	pgtest.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}
