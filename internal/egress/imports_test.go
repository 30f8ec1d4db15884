package egress_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoSandboxImport keeps the dependency one way: the sandbox runtimes use the egress
// path's contract (egress/wire), and the proxy, its tests included, imports nothing of internal/sandbox, whose
// egress hook the harness assembles (sandboxnet).
func TestNoSandboxImport(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("skipping: no go command on PATH")
	}
	const mod = "github.com/trueforge/terraform-provider-trueforge/internal/"
	out, err := exec.Command(goTool, "list", "-deps", "-test", "-f", "{{.ImportPath}}", mod+"egress", mod+"egress/netd").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		if d == mod+"sandbox" || strings.HasPrefix(d, mod+"sandbox/") {
			t.Errorf("internal/egress (or its tests) depends on %s; the constants both sides need live in egress/wire, the tests' network fixtures in internal/nettest", d)
		}
	}
}
