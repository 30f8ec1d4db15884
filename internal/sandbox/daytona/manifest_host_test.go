package daytona_test

import (
	"io/fs"
	"os"
	"strings"
)

// hostRoot is the host's /usr only, as the emulator's sandboxes see the platform image.
type hostRoot struct{}

func (hostRoot) Open(name string) (fs.File, error) {
	if name != "usr" && !strings.HasPrefix(name, "usr/") {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return os.DirFS("/").Open(name)
}
