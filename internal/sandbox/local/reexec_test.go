//go:build linux

package local

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// reexecProbeEnv makes TestMain report whether the test binary got past the dispatch
// (see reportNotReexeced): "import" reports before ReexecMain is called, so only what
// importing the package does has run; "call" reports after ReexecMain returned.
const reexecProbeEnv = "TRUEFORGE_LOCAL_TEST_REEXEC_PROBE"

const notReexeced = "trueforge-test: not re-executed"

// reportNotReexeced says that this process is still the test binary and exits.
func reportNotReexeced() {
	fmt.Println(notReexeced)
	os.Exit(0)
}

// TestImportDoesNotDispatch runs this test binary exactly as the runtime and the builder
// run their helpers (argv, environment, and PID 1 of a new pid namespace for the init),
// once stopping before TestMain calls ReexecMain: importing the package must leave the
// process alone (it once had an init function that turned any importing binary, the
// provider included, into these programs before main), and once after: ReexecMain must
// dispatch each of them, which also shows that the probes are the real invocations.
func TestImportDoesNotDispatch(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		argv []string
		env  string
		pid1 bool
		// dispatched is what the helper prints when it runs: its own error about the
		// bogus plan, or the build script's output.
		dispatched []string
	}{
		{"setup", []string{self, setupArg}, setupEnv + "=/nonexistent/plan.json", false, []string{"trueforge setup:"}},
		{"unshift", []string{self, unshiftArg}, unshiftEnv + "=bogus", false, []string{"trueforge unshift:"}},
		{"build shim", []string{initPath, buildShimArg, "/bin/sh", "-c", "echo build script ran"}, buildShimEnv + "=1", false,
			[]string{"build script ran", "trueforge build shim:"}},
		{"init", []string{initPath}, initEnv + "=1", true, []string{"trueforge init:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, probe := range []string{"import", "call"} {
				cmd := &exec.Cmd{Path: self, Args: c.argv,
					Env: []string{"PATH=" + sandboxPath, c.env, reexecProbeEnv + "=" + probe}}
				if c.pid1 {
					cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
					if os.Geteuid() != 0 {
						cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
						cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
						cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
					}
				}
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				err := cmd.Start()
				if err != nil && c.pid1 {
					t.Skipf("skipping: cannot start a process in a new pid namespace here: %v", err)
				}
				if err != nil {
					t.Fatal(err)
				}
				err = cmd.Wait()
				got := out.String()
				switch probe {
				case "import":
					if err != nil || !strings.Contains(got, notReexeced) {
						t.Errorf("importing the package alone changed the process (%v):\n%s", err, got)
					}
				case "call":
					ran := false
					for _, d := range c.dispatched {
						ran = ran || strings.Contains(got, d)
					}
					if strings.Contains(got, notReexeced) || !ran {
						t.Errorf("ReexecMain did not run the %s (%v):\n%s", c.name, err, got)
					}
				}
			}
		})
	}
}
