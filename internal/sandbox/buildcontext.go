package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Limits of a build context (an environment's build_context folder). They keep a plan
// fast (the folder is read and hashed at every plan that changes the environment) and
// an upload bounded; a larger context belongs in an image.
const (
	// MaxContextBytes is the size of a context's files together.
	MaxContextBytes = 64 << 20
	// MaxContextFiles is how many files a context may hold.
	MaxContextFiles = 4096
)

// BuildContext is a build_context folder as read: its regular files in path order and
// the hash that the snapshot's build hash covers.
type BuildContext struct {
	// Hash is the SHA-256 over every file's path, mode and content hash.
	Hash  string
	Files []ContextFile
	Bytes int64
}

// ContextFile is one regular file of a build context.
type ContextFile struct {
	Path string // slash-separated, relative to the folder
	Mode fs.FileMode
	// Hash is the SHA-256 of the content, hex.
	Hash string
	Size int64
}

// ReadBuildContext reads and hashes folder dir. It refuses, naming the path and the fix:
// a folder that is not one, symbolic links (a context is copied as files; a link could
// name anything on the machine that plans), special files, and a folder over the
// limits. Files are hashed, not kept: Open reads a file again when it is uploaded.
func ReadBuildContext(dir string) (*BuildContext, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the build context %q: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("the build context %q is not a folder: set build_context to a folder next to the configuration", dir)
	}
	ctx := &BuildContext{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch t := d.Type(); {
		case t&fs.ModeSymlink != 0:
			return fmt.Errorf("the build context %q holds a symbolic link, %s: a context is uploaded as files only; copy what it points to into the folder", dir, rel)
		case d.IsDir():
			return nil
		case !t.IsRegular():
			return fmt.Errorf("the build context %q holds %s, which is not a regular file (%s): remove it from the folder", dir, rel, t)
		}
		if len(ctx.Files) == MaxContextFiles {
			return fmt.Errorf("the build context %q holds more than %d files: keep only what the Dockerfile copies, or bake the rest into an image", dir, MaxContextFiles)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if ctx.Bytes += info.Size(); ctx.Bytes > MaxContextBytes {
			return fmt.Errorf("the build context %q is larger than %d MiB: keep only what the Dockerfile copies, or bake the rest into an image", dir, MaxContextBytes>>20)
		}
		sum, err := hashFile(p)
		if err != nil {
			return fmt.Errorf("reading %s of the build context %q: %w", rel, dir, err)
		}
		// Only the executable bit is part of the content: the rest of a mode depends on
		// the umask of whoever checked the folder out.
		mode := fs.FileMode(0o644)
		if info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		ctx.Files = append(ctx.Files, ContextFile{Path: rel, Mode: mode, Hash: sum, Size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(ctx.Files, func(i, j int) bool { return ctx.Files[i].Path < ctx.Files[j].Path })
	h := sha256.New()
	h.Write([]byte("trueforge-context/1\n"))
	for _, f := range ctx.Files {
		fmt.Fprintf(h, "%o %s %s\n", f.Mode, f.Hash, f.Path)
	}
	ctx.Hash = hex.EncodeToString(h.Sum(nil))
	return ctx, nil
}

// Open opens file f of the context read from dir, refusing a path that leaves it.
func (c *BuildContext) Open(dir string, f ContextFile) (*os.File, error) {
	clean := path.Clean(f.Path)
	if clean == ".." || strings.HasPrefix(clean, "../") || path.IsAbs(clean) {
		return nil, fmt.Errorf("build context path %q leaves the folder", f.Path)
	}
	return os.Open(filepath.Join(dir, filepath.FromSlash(clean)))
}

func hashFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
