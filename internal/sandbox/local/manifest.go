package local

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/trueforge/terraform-provider-trueforge/internal/manifest"
)

// Manifest reads what Ready snapshot id contains (builds.Manifester) from its layers on
// this machine, without starting a sandbox: the merged view a sandbox of it sees (each
// layer's files win over the layers below, whiteouts and opaque directories hide what
// is below), with the host's /usr as the lowest layer of usr.
//
// The platform image is the host's /usr, whose packages the host's package database
// lists; that database (/var/lib/dpkg, /lib/apk/db) is not copied into the release, so
// it is read from the host, below every layer: a snapshot whose build wrote its own
// database files sees those first.
func (b *Builder) Manifest(ctx context.Context, id string) (manifest.Manifest, error) {
	layers, err := b.Layers(id)
	if err != nil {
		return manifest.Manifest{}, err
	}
	fsys, err := b.mergedFS(layers)
	if err != nil {
		return manifest.Manifest{}, fmt.Errorf("local: manifest of %s: %w", id, err)
	}
	defer fsys.close()
	if err := ctx.Err(); err != nil {
		return manifest.Manifest{}, err
	}
	m, err := manifest.Extract(fsys)
	if err != nil {
		return m, fmt.Errorf("local: manifest of %s: %w", id, err)
	}
	return m, nil
}

// hostPackageDBs are the folders read from the host below every layer (see Manifest).
var hostPackageDBs = []string{"var/lib/dpkg", "lib/apk/db"}

// mergedFS is a read-only fs.FS of a snapshot's root as its layers stack. Each layer is
// opened as an os.Root, so a symlink in a layer never leads out of it (one that would is
// read as missing).
type mergedFS struct {
	layers  []*os.Root        // topmost first; each holds TopDirs
	layerAt []string          // their host paths (for extended attributes)
	usr     *os.Root          // the host /usr, lowest under usr
	host    *os.Root          // the host root, for hostPackageDBs only
	links   map[string]string // the root's bin, lib...: their target, "" for a host bind
}

func (b *Builder) mergedFS(layers []string) (*mergedFS, error) {
	m := &mergedFS{links: map[string]string{}}
	for _, l := range layers {
		r, err := os.OpenRoot(l)
		if err != nil {
			m.close()
			return nil, err
		}
		m.layers = append(m.layers, r)
		m.layerAt = append(m.layerAt, l)
	}
	var err error
	if m.usr, err = os.OpenRoot(b.hostUsr); err != nil {
		m.close()
		return nil, err
	}
	if r, err := os.OpenRoot(b.hostRoot); err == nil {
		m.host = r
	}
	for _, l := range hostRootLinks(b.hostRoot) {
		// "" is a host directory bound read-only (a host without merged /usr).
		m.links[l.name] = ""
		if l.target != "" {
			m.links[l.name] = strings.TrimPrefix(path.Clean(l.target), "/")
		}
	}
	return m, nil
}

func (m *mergedFS) close() {
	for _, r := range append(slices.Clone(m.layers), m.usr, m.host) {
		if r != nil {
			_ = r.Close()
		}
	}
}

// source is one place a path may be found: a root and the path inside it.
type source struct {
	root  *os.Root
	rel   string
	layer int // index into layers, -1 for the host
}

// sources lists where name may be, topmost first, after following the root's symlinks
// (lib -> usr/lib).
func (m *mergedFS) sources(name string) []source {
	first, rest, _ := strings.Cut(name, "/")
	if t, ok := m.links[first]; ok {
		if t == "" {
			if m.host == nil {
				return nil
			}
			return []source{{m.host, name, -1}}
		}
		name = path.Join(t, rest)
		first, rest, _ = strings.Cut(name, "/")
	}
	if !slices.Contains(TopDirs(), first) {
		return nil
	}
	var out []source
	for i, r := range m.layers {
		out = append(out, source{r, name, i})
	}
	if first == "usr" {
		rel := rest
		if rel == "" {
			rel = "."
		}
		out = append(out, source{m.usr, rel, -1})
	}
	if m.host != nil {
		for _, db := range hostPackageDBs {
			if name == db || strings.HasPrefix(name, db+"/") {
				out = append(out, source{m.host, name, -1})
			}
		}
	}
	return out
}

func isWhiteout(fi fs.FileInfo) bool {
	if fi.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

func (m *mergedFS) opaque(s source) bool {
	if s.layer < 0 {
		return false
	}
	buf := make([]byte, 1)
	n, err := unix.Lgetxattr(filepath.Join(m.layerAt[s.layer], s.rel), "user.overlay.opaque", buf)
	return err == nil && n == 1 && buf[0] == 'y'
}

// hides reports whether layer source s hides s.rel in the layers below it: an ancestor
// of it is a whiteout or an opaque directory there.
func (m *mergedFS) hides(s source) bool {
	if s.layer < 0 {
		return false
	}
	dir := s.rel
	for {
		dir = path.Dir(dir)
		if dir == "." || dir == "/" {
			return false
		}
		fi, err := s.root.Lstat(dir)
		if err != nil {
			continue
		}
		if isWhiteout(fi) || fi.IsDir() && m.opaque(source{s.root, dir, s.layer}) {
			return true
		}
	}
}

// Open opens the topmost file or directory at name.
func (m *mergedFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	for _, s := range m.sources(name) {
		fi, err := s.root.Lstat(s.rel)
		if err == nil {
			if isWhiteout(fi) {
				break
			}
			return s.root.Open(s.rel)
		}
		if m.hides(s) {
			break
		}
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// Stat is Open's file's Stat.
func (m *mergedFS) Stat(name string) (fs.FileInfo, error) {
	f, err := m.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// ReadDir merges the directory's entries of every layer down to the first that hides
// the rest (opaque, or a whiteout of the directory itself).
func (m *mergedFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	seen := map[string]bool{}
	var out []fs.DirEntry
	found := false
	for _, s := range m.sources(name) {
		fi, err := s.root.Lstat(s.rel)
		if err != nil {
			if m.hides(s) {
				break
			}
			continue
		}
		if isWhiteout(fi) || !fi.IsDir() {
			break
		}
		found = true
		f, err := s.root.Open(s.rel)
		if err != nil {
			continue
		}
		entries, _ := f.ReadDir(-1)
		_ = f.Close()
		for _, e := range entries {
			if seen[e.Name()] {
				continue
			}
			seen[e.Name()] = true
			if e.Type()&fs.ModeCharDevice != 0 {
				if info, err := e.Info(); err == nil && isWhiteout(info) {
					continue
				}
			}
			out = append(out, e)
		}
		if m.opaque(s) {
			break
		}
	}
	if !found {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

var _ interface {
	fs.ReadDirFS
	fs.StatFS
} = (*mergedFS)(nil)
