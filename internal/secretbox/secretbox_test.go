package secretbox

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeyFileCreatedOwnerOnlyAndReused(t *testing.T) {
	file := filepath.Join(t.TempDir(), "k", "secret.key")
	b1, err := Load("", file)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, want 0600", info.Mode().Perm())
	}
	sealed, err := b1.Seal([]byte("hunter2"), "env/TOKEN")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("hunter2")) {
		t.Fatal("sealed value contains the plaintext")
	}
	b2, err := Load("", file)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b2.Open(sealed, "env/TOKEN")
	if err != nil || string(got) != "hunter2" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := b2.Open(sealed, "other/TOKEN"); err == nil {
		t.Fatal("a value sealed for one row opened for another")
	}
}

func TestKeyFileReadableByOthersIsRefused(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secret.key")
	if _, err := Load("", file); err != nil {
		t.Fatal(err)
	}
	os.Chmod(file, 0o644)
	_, err := Load("", file)
	if err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("err = %v, want a refusal naming chmod 600", err)
	}
}

func TestEnvKey(t *testing.T) {
	if _, err := Load("short", ""); err == nil || !strings.Contains(err.Error(), KeyEnv) {
		t.Fatalf("err = %v, want an error naming %s", err, KeyEnv)
	}
	b, err := Load(strings.Repeat("ab", 32), "")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := b.Seal([]byte("x"), "a")
	if _, err := b.Open(s, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(s[:5], "a"); err == nil {
		t.Fatal("truncated value opened")
	}
}
