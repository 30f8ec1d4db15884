package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadBuildContextHashesContentAndRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string, mode os.FileMode) {
		t.Helper()
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("app/main.py", "print(1)\n", 0o644)
	write("run.sh", "#!/bin/sh\n", 0o755)
	a, err := ReadBuildContext(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Files) != 2 || a.Files[0].Path != "app/main.py" || a.Files[1].Mode != 0o755 {
		t.Fatalf("files = %+v", a.Files)
	}
	write("app/main.py", "print(2)\n", 0o644)
	b, _ := ReadBuildContext(dir)
	if b.Hash == a.Hash {
		t.Fatal("a changed file does not change the context hash")
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "leak")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadBuildContext(dir); err == nil || !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), "leak") {
		t.Fatalf("a symlink in the context: %v", err)
	}
	if _, err := ReadBuildContext(filepath.Join(dir, "run.sh")); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Fatalf("a file as the context: %v", err)
	}
}
