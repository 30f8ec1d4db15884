//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// File operations work on the sandbox's workspace from the host, through os.Root: no
// path, ".." or symlink (absolute or relative, in any component) reaches outside it. On
// top of that the last component is never followed when it is a symlink, and only
// regular files are read or written (a FIFO or device planted by the sandbox is refused,
// never opened in a way that could block).

func (r *Runtime) openWorkspace(id string) (*os.Root, error) {
	rec, err := r.readRecord(id)
	if err != nil {
		return nil, err
	}
	if err := r.ensureData(context.Background(), id, rec); err != nil {
		return nil, err
	}
	return os.OpenRoot(r.wsDir(id))
}

// fileErr wraps a file operation's error; a missing file is sandbox.ErrNotFound too, as
// every runtime reports it.
func fileErr(op, id, p string, err error) error {
	if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, sandbox.ErrNotFound) {
		return fmt.Errorf("local: %s %q in sandbox %s: %w (%w)", op, p, id, sandbox.ErrNotFound, err)
	}
	return fmt.Errorf("local: %s %q in sandbox %s: %w", op, p, id, err)
}

// WriteFile creates or replaces a regular file in the workspace (and its parent
// directories) with r's content, up to MaxFileSize bytes.
func (r *Runtime) WriteFile(ctx context.Context, id, p string, src io.Reader, mode fs.FileMode) error {
	if err := r.writeFile(ctx, id, p, src, mode); err != nil {
		return fileErr("write", id, p, err)
	}
	return nil
}

func (r *Runtime) writeFile(_ context.Context, id, p string, src io.Reader, mode fs.FileMode) error {
	rel, err := sandbox.WorkspacePath(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return errors.New("not a file path")
	}
	root, err := r.openWorkspace(id)
	if err != nil {
		return err
	}
	defer root.Close()
	owner, err := r.workspaceOwner(id)
	if err != nil {
		return err
	}
	if dir := path.Dir(rel); dir != "." {
		if err := mkdirAllOwned(root, dir, owner); err != nil {
			return err
		}
	}
	if fi, err := root.Lstat(rel); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("refusing to write over a %s", kind(fi.Mode()))
	}
	if mode == 0 {
		mode = 0o644
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, mode.Perm())
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return errors.New("refusing to write to a file that is not regular")
	}
	if owner != nil {
		if err := f.Chown(owner[0], owner[1]); err != nil {
			return err
		}
	}
	n, err := io.Copy(f, io.LimitReader(src, r.maxFile()+1))
	if err == nil && n > r.maxFile() {
		_ = f.Truncate(0)
		err = fmt.Errorf("%w: more than %d bytes", sandbox.ErrTooLarge, r.maxFile())
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// workspaceOwner is the host uid and gid that files written into the workspace get: the
// sandbox user's in the sandbox's id slot, or nil when this process's own ids are the
// sandbox user's (unprivileged).
func (r *Runtime) workspaceOwner(id string) (*[2]int, error) {
	if r.b.ids == nil {
		return nil, nil
	}
	rec, err := r.readRecord(id)
	if err != nil {
		return nil, err
	}
	if rec.IDs == nil {
		return nil, fmt.Errorf("sandbox %s has no id slot", id)
	}
	return &[2]int{int(rec.IDs.hostUID(sandboxUIDn)), int(rec.IDs.hostGID(sandboxUIDn))}, nil
}

// mkdirAllOwned is root.MkdirAll(dir, 0o755) that gives each directory it makes to owner
// (nil: leaves them to this process).
func mkdirAllOwned(root *os.Root, dir string, owner *[2]int) error {
	if owner == nil {
		return root.MkdirAll(dir, 0o755)
	}
	cur := ""
	for _, part := range strings.Split(dir, "/") {
		cur = path.Join(cur, part)
		err := root.Mkdir(cur, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := root.Lchown(cur, owner[0], owner[1]); err != nil {
			return err
		}
	}
	return nil
}

// ReadFile returns a regular file of the workspace; ErrTooLarge if it holds more than maxBytes
// bytes (0: MaxFileSize). A symlink is refused, wherever it points.
func (r *Runtime) ReadFile(ctx context.Context, id, p string, maxBytes int64) ([]byte, error) {
	data, err := r.readFile(ctx, id, p, maxBytes)
	if err != nil {
		return nil, fileErr("read", id, p, err)
	}
	return data, nil
}

func (r *Runtime) readFile(_ context.Context, id, p string, maxBytes int64) ([]byte, error) {
	if maxBytes <= 0 {
		maxBytes = r.maxFile()
	}
	rel, err := sandbox.WorkspacePath(p)
	if err != nil {
		return nil, err
	}
	root, err := r.openWorkspace(id)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	fi, err := root.Lstat(rel)
	if err != nil {
		return nil, escaped(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("refusing to read a %s: %w", kind(fi.Mode()), sandbox.ErrNotRegular)
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		// The sandbox swapped the file for a symlink since the Lstat: O_NOFOLLOW (ELOOP)
		// or os.Root (a link leading out) refused it.
		if now, lerr := root.Lstat(rel); lerr == nil && !now.Mode().IsRegular() || errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("refusing to read it: it was replaced while being opened: %w", sandbox.ErrNotRegular)
		}
		return nil, escaped(err)
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !ofi.Mode().IsRegular() || !os.SameFile(fi, ofi) {
		return nil, fmt.Errorf("refusing to read it: it was replaced while being opened: %w", sandbox.ErrNotRegular)
	}
	if ofi.Size() > maxBytes {
		return nil, fmt.Errorf("%w: %d bytes, over %d", sandbox.ErrTooLarge, ofi.Size(), maxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > maxBytes {
		return nil, fmt.Errorf("%w: over %d bytes", sandbox.ErrTooLarge, maxBytes)
	}
	return data, nil
}

// escaped is err, or ErrNotRegular when err is os.Root refusing a symlink in the path
// that leads out of the workspace: the sandbox's doing, not the runtime's failure. os
// keeps that error unexported; TestReadFileRefusesASymlinkSwappedIn notices a change.
func escaped(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Err.Error() == "path escapes from parent" {
		return fmt.Errorf("refusing to follow a symlink out of the workspace: %w (%w)", sandbox.ErrNotRegular, err)
	}
	return err
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

func fileInfo(rel string, fi fs.FileInfo) sandbox.FileInfo {
	return sandbox.FileInfo{Path: filepath.ToSlash(rel), Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}
}

// StatFile describes one entry of the workspace without following a final symlink.
func (r *Runtime) StatFile(_ context.Context, id, p string) (sandbox.FileInfo, error) {
	rel, err := sandbox.WorkspacePath(p)
	if err != nil {
		return sandbox.FileInfo{}, fileErr("stat", id, p, err)
	}
	root, err := r.openWorkspace(id)
	if err != nil {
		return sandbox.FileInfo{}, fileErr("stat", id, p, err)
	}
	defer root.Close()
	fi, err := root.Lstat(rel)
	if err != nil {
		return sandbox.FileInfo{}, fileErr("stat", id, p, escaped(err))
	}
	return fileInfo(rel, fi), nil
}

// ListFiles lists a workspace directory (not recursively), by name.
func (r *Runtime) ListFiles(_ context.Context, id, dir string) ([]sandbox.FileInfo, error) {
	rel, err := sandbox.WorkspacePath(dir)
	if err != nil {
		return nil, fileErr("list", id, dir, err)
	}
	root, err := r.openWorkspace(id)
	if err != nil {
		return nil, fileErr("list", id, dir, err)
	}
	defer root.Close()
	if fi, err := root.Lstat(rel); err != nil {
		return nil, fileErr("list", id, dir, err)
	} else if !fi.IsDir() {
		return nil, fileErr("list", id, dir, fmt.Errorf("not a directory but a %s", kind(fi.Mode())))
	}
	d, err := root.Open(rel)
	if err != nil {
		return nil, fileErr("list", id, dir, err)
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, fileErr("list", id, dir, err)
	}
	out := make([]sandbox.FileInfo, 0, len(entries))
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, fileInfo(path.Join(rel, e.Name()), fi))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// DeleteFile removes a file, symlink (not its target) or directory tree of the workspace.
func (r *Runtime) DeleteFile(_ context.Context, id, p string) error {
	rel, err := sandbox.WorkspacePath(p)
	if err != nil {
		return fileErr("delete", id, p, err)
	}
	if rel == "." {
		return fileErr("delete", id, p, errors.New("refusing to delete the workspace"))
	}
	root, err := r.openWorkspace(id)
	if err != nil {
		return fileErr("delete", id, p, err)
	}
	defer root.Close()
	if err := root.RemoveAll(rel); err != nil {
		return fileErr("delete", id, p, err)
	}
	return nil
}
