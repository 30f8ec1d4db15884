package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// sqliteFileMode is the mode of a control plane's SQLite file: owner-only, as it holds
// sealed secrets and the hashes of the harness users' API tokens. SQLite gives the -wal
// and -shm files it creates the mode of the database file.
const sqliteFileMode = 0o600

// secureSQLiteFiles creates the database file at path with sqliteFileMode when it is
// missing (left to SQLite it would be 0644 under the usual umask), and takes group and
// other access away from it and from its -wal and -shm files when they have any (files
// of earlier releases, or made by hand): a database whose secrets others can read is
// not one to keep using as it is. Tightening a file the caller does not own fails, and
// so does the open: its owner runs chmod 600 on it.
func secureSQLiteFiles(path string) error {
	if path == ":memory:" {
		return nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, sqliteFileMode)
		if err != nil && !errors.Is(err, fs.ErrExist) { // another process's open made it first
			return fmt.Errorf("creating database %s: %w", path, err)
		}
		if f != nil {
			f.Close()
		}
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("database %s: %w", path, err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			if err := os.Chmod(p, perm&^0o077); err != nil {
				return fmt.Errorf("database file %s is open to other users (mode %04o) and could not be made owner-only: %w; "+
					"it holds sealed secrets and token hashes: its owner should run chmod 600 %s", p, perm, err, p)
			}
		}
	}
	return nil
}
