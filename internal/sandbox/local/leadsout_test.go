//go:build linux

package local

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLeadsOut: leadsOut, the walk by which escaped confirms os.Root's refusal, says a path
// leads out of its root exactly when a ".." climbs above it or a symlink on the way (followed as
// os.Root follows it, chains and loops too) is absolute or climbs above it.
func TestLeadsOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"abs": "/etc", "up": "../..", "in": "sub", "chain": "in/../abs", "inup": "sub/deep/../..",
		"loop": "loop", "sub/deep/back": "../../in",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for rel, want := range map[string]bool{
		"abs/passwd": true, "up/x": true, "chain/x": true, "..": true, "sub/../../x": true,
		"in/deep": false, "inup/sub": false, "sub/deep/back/deep": false, "loop/x": false, "missing/x": false, "sub/..": false,
	} {
		if got := leadsOut(root, rel); got != want {
			t.Errorf("leadsOut(%q) = %v; want %v", rel, got, want)
		}
	}
}
