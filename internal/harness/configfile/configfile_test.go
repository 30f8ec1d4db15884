package configfile_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/configfile"
)

var errBad = errors.New("bad")

func parse(data []byte) (string, error) {
	if string(data) == "bad" {
		return "", errBad
	}
	return strings.ToUpper(string(data)), nil
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.json"), filepath.Join(dir, "bad.json")
	for path, text := range map[string]string{good: "ok", bad: "bad"} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := configfile.Read(good, "thing", "thing file", parse); err != nil || v != "OK" {
		t.Errorf("good file: %q, %v", v, err)
	}
	_, err := configfile.Read(bad, "thing", "thing file", parse)
	if !errors.Is(err, errBad) || !strings.HasPrefix(err.Error(), "thing file "+bad+": ") {
		t.Errorf("a parse error should wrap parse's error after the file's name: %v", err)
	}
	_, err = configfile.Read(filepath.Join(dir, "missing.json"), "thing", "thing file", parse)
	if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "thing: ") {
		t.Errorf("a read error should wrap the file system's error after what: %v", err)
	}
}
