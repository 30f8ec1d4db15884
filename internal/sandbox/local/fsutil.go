package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// writeFileAtomic writes a file under a temporary name and renames it into place, so a
// reader in another process sees either nothing or the whole content.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// readJSONFile reads the noun (metadata, state) that file records about what (a
// snapshot's or a sandbox's, "snapshot ID"): sandbox.ErrNotFound (wrapped) when the
// file is missing, as when what does not exist.
func readJSONFile[T any](file, noun, what string) (T, error) {
	var v T
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return v, fmt.Errorf("%s: %w", what, sandbox.ErrNotFound)
	}
	if err != nil {
		return v, fmt.Errorf("read %s of %s: %w", noun, what, err)
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return v, fmt.Errorf("parse %s of %s: %w", noun, what, err)
	}
	return v, nil
}

// writeJSONFile records v in file, indented, readable by the runtime's user only and
// atomically (writeFileAtomic), for readJSONFile.
func writeJSONFile(file string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(file, append(data, '\n'), 0o600)
}

// removeAll removes a tree that may contain directories without owner permissions: an
// overlay workdir leaves a mode-000 "work" directory, and build scripts may chmod their
// own directories. Root ignores the bits, an unprivileged owner must restore them first.
// It retries briefly because processes of a just-killed build may still be writing.
func removeAll(path string) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = os.RemoveAll(path); err == nil {
			return nil
		}
		_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, werr error) error {
			// WalkDir calls us for a directory before reading it, so fixing its mode
			// here lets the walk descend into it.
			if werr == nil && d.IsDir() {
				_ = os.Chmod(p, 0o700)
			}
			return nil
		})
		time.Sleep(time.Duration(attempt) * 50 * time.Millisecond)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
