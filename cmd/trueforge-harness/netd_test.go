package main

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sandboxnet"
)

// The harness serves as netd exactly when started the ways the local runtime and an
// operator start the helper, and never takes a harness command for netd.
func TestNetdArgs(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want []string
		ok   bool
	}{
		{[]string{"/run/trueforge/netd"}, []string{}, true},
		{[]string{"/usr/local/bin/trueforge-netd", "-socket", "/x.sock"}, []string{"-socket", "/x.sock"}, true},
		{[]string{"trueforge-harness", "netd", "-ready", "/tmp/r"}, []string{"-ready", "/tmp/r"}, true},
		{[]string{"/opt/trueforge-harness", "-prepare"}, []string{"-prepare"}, true},
		{[]string{"trueforge-harness", "run", "netd", "hi"}, nil, false},
		{[]string{"trueforge-harness"}, nil, false},
		{nil, nil, false},
	} {
		got, ok := netdArgs(c.argv)
		if ok != c.ok || !slices.Equal(got, c.want) && len(got)+len(c.want) > 0 {
			t.Errorf("netdArgs(%q) = %q, %v; want %q, %v", c.argv, got, ok, c.want, c.ok)
		}
	}
	// netd.Main makes its caller not dumpable, so it runs in the static harness TestMain
	// built, not in this process.
	cmd := exec.Command(os.Getenv(sandboxnet.HelperEnv), "netd", "-no-such-flag")
	var ee *exec.ExitError
	if out, err := cmd.CombinedOutput(); !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("bad flag: %v; want exit status 2\n%s", err, out)
	}
}
