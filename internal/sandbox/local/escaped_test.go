package local

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// escaped knows os.Root's refusal of a symlink out of the root by the error's value
// (errEscapes), whatever path was refused, and passes every other error through: a
// missing file is not the sandbox's attack.
func TestEscapedKnowsOSRootsRefusal(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("/etc", filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../..", filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, rel := range []string{"out/passwd", "up/etc/passwd", "../x"} {
		_, err := root.Open(rel)
		if err == nil {
			t.Fatalf("os.Root opened %q", rel)
		}
		if got := escaped(err); !errors.Is(got, sandbox.ErrNotRegular) {
			t.Errorf("escaped(%q: %v) = %v; want ErrNotRegular", rel, err, got)
		}
	}
	_, err = root.Open("missing")
	if got := escaped(err); errors.Is(got, sandbox.ErrNotRegular) || !errors.Is(got, fs.ErrNotExist) {
		t.Errorf("escaped(missing) = %v; want the not-exist error as it was", got)
	}
}
