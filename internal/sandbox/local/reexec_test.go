//go:build linux

package local

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// reexecProbeEnv makes TestMain report whether the test binary got past the dispatch
// (see reportNotReexeced): "import" reports before ReexecMain is called, so only what
// importing the package does has run; "call" reports after ReexecMain returned.
const reexecProbeEnv = "TRUEFORGE_LOCAL_TEST_REEXEC_PROBE"

const notReexeced = "trueforge-test: not re-executed"

const modulePath = "github.com/trueforge/terraform-provider-trueforge"

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
		{"keeper", []string{self, keeperArg}, keeperEnv + "=" + keeperNow, false, []string{"trueforge keeper:"}},
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

// TestEveryBinaryCallsReexecMain finds the module's commands that link this package and
// checks that each one's main calls ReexecMain, directly or through the backend registry
// (backends.ReexecMain, how code outside the backends reaches it), as its first
// statement: a command that
// forgot it would, re-executed as a setup step or a sandbox init, run its own main
// instead (the provider would serve, the harness print its usage) and every sandbox and
// build it starts would fail.
func TestEveryBinaryCallsReexecMain(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("skipping: no go command on PATH")
	}
	const self = modulePath + "/internal/sandbox/local"
	cmd := exec.Command(goTool, "list", "-f",
		`{{if eq .Name "main"}}{{range .Deps}}{{if eq . "`+self+`"}}{{$.Dir}}{{range $.GoFiles}} {{.}}{{end}}{{"\n"}}{{end}}{{end}}{{end}}`, modulePath+"/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n++
		if !firstCallsReexecMain(t, f[0], f[1:]) {
			t.Errorf("%s: func main must call backends.ReexecMain() as its first statement", f[0])
		}
	}
	if n < 2 { // the provider and the harness at least
		t.Fatalf("go list found %d commands that link package local:\n%s", n, out)
	}
}

// firstCallsReexecMain reports whether the main function among files in dir starts with
// a call of ReexecMain of this package or of the registry, internal/backends.
func firstCallsReexecMain(t *testing.T, dir string, files []string) bool {
	t.Helper()
	fset := token.NewFileSet()
	for _, name := range files {
		file, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		pkgNames := map[string]bool{}
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if name, ok := map[string]string{
				modulePath + "/internal/sandbox/local": "local",
				modulePath + "/internal/backends":      "backends",
			}[path]; ok {
				if imp.Name != nil {
					name = imp.Name.Name
				}
				pkgNames[name] = true
			}
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Name.Name != "main" {
				continue
			}
			if fn.Body == nil || len(fn.Body.List) == 0 {
				return false
			}
			es, ok := fn.Body.List[0].(*ast.ExprStmt)
			if !ok {
				return false
			}
			call, ok := es.X.(*ast.CallExpr)
			if !ok {
				return false
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return false
			}
			x, ok := sel.X.(*ast.Ident)
			return ok && pkgNames[x.Name] && sel.Sel.Name == "ReexecMain"
		}
	}
	return false
}
