package netd

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestNoHostSideImports keeps netd, which runs inside the sandbox, free of the host
// side: its import graph may hold the standard library and the contract it shares with
// the proxy and the runtimes (internal/egress/wire), and nothing else. Above all not
// internal/egress, the proxy with its TLS termination, CA, policy and secrets, nor
// anything that package or a later one brings in (a third-party module included).
func TestNoHostSideImports(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("skipping: no go command on PATH")
	}
	const mod = "github.com/trueforge/terraform-provider-trueforge/internal/"
	allowed := []string{mod + "egress/netd", mod + "egress/wire"}
	for _, goos := range []string{"linux", "darwin"} {
		cmd := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", mod+"egress/netd")
		cmd.Env = append(cmd.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("go list (GOOS=%s): %v\n%s", goos, err, stderr)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, mod+"egress/netd") {
			t.Fatalf("go list (GOOS=%s) does not list netd itself: %q", goos, deps)
		}
		for _, d := range deps {
			if !slices.Contains(allowed, d) {
				t.Errorf("GOOS=%s: netd imports %s; it runs inside the sandbox and may import only the standard library and egress/wire", goos, d)
			}
		}
	}
}
