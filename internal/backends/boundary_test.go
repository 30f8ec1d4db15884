package backends_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
)

const module = "github.com/trueforge/terraform-provider-trueforge/"

// backendDirs are the backend packages (with their subpackages) and the registry: the only
// code that may import a backend package or know a provider type by name.
var backendDirs = []string{"internal/sandbox/local", "internal/sandbox/daytona", "internal/backends"}

func inBackend(rel string) bool {
	for _, d := range backendDirs {
		if rel == d || strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}

// TestBackendBoundary: outside the backend packages and the registry, no non-test code
// imports a backend package or compares a string with a provider type (== "local",
// case "daytona", ...): what differs between backends is asked of the Backend.
func TestBackendBoundary(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]bool{}
	for _, typ := range backends.Default().Types() {
		types[strconv.Quote(typ)] = true
	}
	backendImports := map[string]bool{}
	for _, d := range backendDirs[:2] {
		backendImports[module+d] = true
	}
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || inBackend(rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for b := range backendImports {
				if path == b || strings.HasPrefix(path, b+"/") {
					t.Errorf("%s imports backend package %s; reach backends through internal/backends", rel, path)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var lits []ast.Expr
			switch x := n.(type) {
			case *ast.BinaryExpr:
				if x.Op == token.EQL || x.Op == token.NEQ {
					lits = append(lits, x.X, x.Y)
				}
			case *ast.CaseClause:
				lits = append(lits, x.List...)
			}
			for _, e := range lits {
				if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING && types[lit.Value] {
					t.Errorf("%s: compares with provider type %s; ask the Backend (Info, Capabilities) instead", fset.Position(lit.Pos()), lit.Value)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files: is the module root right?", checked)
	}
}
