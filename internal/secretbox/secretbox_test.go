package secretbox

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
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
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
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

// The check value is a function of the key alone: the same key gives the same value
// wherever it is loaded from, another key another value, and the value does not contain
// the key in any encoding.
func TestCheckValueIdentifiesTheKey(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	a, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(base64.StdEncoding.EncodeToString(key), "")
	if err != nil {
		t.Fatal(err)
	}
	if a.CheckValue() != b.CheckValue() || len(a.CheckValue()) != 64 {
		t.Fatalf("check values of one key: %q, %q", a.CheckValue(), b.CheckValue())
	}
	other, err := New(bytes.Repeat([]byte{8}, 32))
	if err != nil {
		t.Fatal(err)
	}
	if other.CheckValue() == a.CheckValue() {
		t.Fatal("two keys have the same check value")
	}
	for _, enc := range []string{hex.EncodeToString(key), base64.StdEncoding.EncodeToString(key)} {
		if strings.Contains(a.CheckValue(), enc[:16]) {
			t.Fatalf("the check value %q contains the key", a.CheckValue())
		}
	}
}
