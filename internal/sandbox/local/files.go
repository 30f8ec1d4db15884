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
	"sync"
	"syscall"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// File operations work on the sandbox's workspace from the host, through os.Root, or on
// the volume mounted where the path lies (openFor): no path, ".." or symlink (absolute or
// relative, in any component) reaches outside the workspace or that volume. On
// top of that the last component is never followed when it is a symlink, and only
// regular files are read or written (a FIFO or device planted by the sandbox is refused,
// never opened in a way that could block).

// openFor opens what workspace path rel (cleaned, relative to /workspace) lies in, as
// the sandbox's commands see it: the volume mounted at the longest mount path of the
// sandbox that holds /workspace/<rel>, else the workspace. In a volume, root is the
// volume's directory or its subpath, and inner is the rest of rel ("." for the mount
// point itself, the volume's root). owner is the host uid and gid that the files and
// directories the operation makes must get so that the sandbox user owns them (nil: this
// process's own).
//
// A volume is opened as the setup step binds it (stageVolume): the volume's directory,
// then each folder of the subpath, none of which may be a symbolic link (a sandbox that
// mounts the whole volume can put one where the subpath was), the subpath opened through
// the volume's os.Root, so that a link swapped in meanwhile still cannot lead out of the
// volume. Inside the opened root, os.Root keeps every operation there, as in the
// workspace.
func (r *Runtime) openFor(ctx context.Context, id, rel string) (root *os.Root, inner string, owner *[2]int, err error) {
	rec, err := r.readRecord(id)
	if err != nil {
		return nil, "", nil, err
	}
	if err := r.ensureData(ctx, id, rec); err != nil {
		return nil, "", nil, err
	}
	v, inner := volumeAt(rec.Volumes, rel)
	if v == nil {
		if owner, err = r.workspaceOwner(id); err != nil {
			return nil, "", nil, err
		}
		root, err = os.OpenRoot(r.wsDir(id))
		return root, rel, owner, err
	}
	if root, err = openVolume(ctx, *v); err != nil {
		return nil, "", nil, fmt.Errorf("volume mounted at %s: %w", v.MountPath, err)
	}
	return root, inner, r.volumeOwner(), nil
}

// volumeAt is the volume of vols whose mount path holds workspace path rel (the longest,
// though mount paths never overlap) and the rest of rel inside it, or nil and rel.
func volumeAt(vols []volumeBind, rel string) (*volumeBind, string) {
	abs := path.Join(sandbox.WorkspaceDir, rel)
	var best *volumeBind
	for i := range vols {
		m := vols[i].MountPath
		if (abs == m || strings.HasPrefix(abs, m+"/")) && (best == nil || len(m) > len(best.MountPath)) {
			best = &vols[i]
		}
	}
	if best == nil {
		return nil, rel
	}
	if abs == best.MountPath {
		return best, "."
	}
	return best, strings.TrimPrefix(abs, best.MountPath+"/")
}

// mountUnder is the mount path of a volume of vols strictly inside workspace path rel,
// or "".
func mountUnder(vols []volumeBind, rel string) string {
	abs := path.Join(sandbox.WorkspaceDir, rel)
	for _, v := range vols {
		if strings.HasPrefix(v.MountPath, abs+"/") {
			return v.MountPath
		}
	}
	return ""
}

// openVolume opens the folder of a volume that a sandbox mounts (see openFor), its image
// mounted first when missing, as a sandbox's setup does: the runtime must write onto the
// image, not into the directory under it.
func openVolume(ctx context.Context, v volumeBind) (*os.Root, error) {
	if err := ensureVolumeMounted(ctx, v.Dir); err != nil {
		return nil, err
	}
	vol, err := os.OpenRoot(v.Dir)
	if err != nil {
		return nil, err
	}
	if v.Subpath == "" {
		return vol, nil
	}
	defer vol.Close()
	cur := ""
	for _, part := range strings.Split(v.Subpath, "/") {
		cur = path.Join(cur, part)
		fi, err := vol.Lstat(cur)
		if err != nil {
			return nil, fmt.Errorf("subpath %q: %w", v.Subpath, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("subpath %q: %s is a %s, not a folder of the volume: %w", v.Subpath, cur, kind(fi.Mode()), sandbox.ErrNotRegular)
		}
	}
	sub, err := vol.OpenRoot(v.Subpath)
	if err != nil {
		return nil, fmt.Errorf("subpath %q: %w", v.Subpath, escaped(err))
	}
	return sub, nil
}

// volumeOwner is the host uid and gid that files written into a volume get. A sandbox
// with an id slot mounts its volumes idmapped (mapUser): host id 0, the runtime's user
// that owns the volume's directory, shows as the sandbox user, so that is what they get.
// Unprivileged (no slot, no idmapping) this process's ids are the sandbox user's: nil.
func (r *Runtime) volumeOwner() *[2]int {
	if r.b.ids == nil {
		return nil
	}
	return &[2]int{0, 0}
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

func (r *Runtime) writeFile(ctx context.Context, id, p string, src io.Reader, mode fs.FileMode) error {
	rel, err := sandbox.WorkspacePath(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return errors.New("not a file path")
	}
	// From here rel is relative to root: the workspace's, or a volume's.
	root, rel, owner, err := r.openFor(ctx, id, rel)
	if err != nil {
		return err
	}
	defer root.Close()
	if rel == "." {
		return errors.New("not a file path: a volume is mounted there")
	}
	if dir := path.Dir(rel); dir != "." {
		if err := mkdirAllOwned(root, dir, owner); err != nil {
			return escaped(err)
		}
	}
	fi, err := root.Lstat(rel)
	if err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("refusing to write over a %s", kind(fi.Mode()))
	}
	existed := err == nil
	defaultMode := mode == 0 || mode.Perm() == 0o644
	if mode == 0 {
		mode = 0o644
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, mode.Perm())
	if err != nil {
		return escaped(err)
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
	// A new file gets the mode exactly (OpenFile's is less the umask); an existing one
	// keeps its mode unless another than the default is asked for, as the contract says
	// on every backend (sandbox.Runtime.WriteFile, sandboxtest's Files).
	if !existed || !defaultMode {
		if err := f.Chmod(mode.Perm()); err != nil {
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

func (r *Runtime) readFile(ctx context.Context, id, p string, maxBytes int64) ([]byte, error) {
	if maxBytes <= 0 {
		maxBytes = r.maxFile()
	}
	rel, err := sandbox.WorkspacePath(p)
	if err != nil {
		return nil, err
	}
	// From here rel is relative to root: the workspace's, or a volume's.
	root, rel, _, err := r.openFor(ctx, id, rel)
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

// escaped is err, or ErrNotRegular when err is os.Root refusing a path because a
// symlink in it leads out of root (the workspace, or the volume the path is in): the
// sandbox's doing, not the runtime's failure. os keeps that error unexported, so it is
// compared with the value os.Root gives for a path that plainly escapes (errEscapes),
// never by its text, and never by walking the path again: the sandbox may have swapped
// the link back by then (TestDownloadsResistTheSandbox races exactly that).
//
// ELOOP is the sandbox's doing too: a path through a symlink loop (loop1 -> loop2 ->
// loop1, self -> self), which the kernel gives up on after 40 links, or a symlink where
// O_NOFOLLOW wanted a file.
func escaped(err error) error {
	if esc := errEscapes(); esc != nil && errors.Is(err, esc) {
		return fmt.Errorf("refusing to follow a symlink out of the workspace or volume: %w (%w)", sandbox.ErrNotRegular, err)
	}
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("refusing a path through a symlink loop, or to a symlink: %w (%w)", sandbox.ErrNotRegular, err)
	}
	return err
}

// errEscapes is os.Root's refusal of a path that leads out of it, as os.Root returns it
// for ".." at the root of the file system; nil if it cannot be had (no "/" to open),
// when escaped passes every error through as it is.
var errEscapes = sync.OnceValue(func() error {
	root, err := os.OpenRoot("/")
	if err != nil {
		return nil
	}
	defer root.Close()
	_, err = root.Open("..")
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return nil
})

// kind names what a file that is not regular is, for a refusal.
func kind(m fs.FileMode) string {
	switch t := sandbox.FileType(m); t {
	case "dir":
		return "directory"
	case "fifo":
		return "named pipe"
	case "symlink", "socket", "device":
		return t
	}
	return "special file"
}

func fileInfo(rel string, fi fs.FileInfo) sandbox.FileInfo {
	return sandbox.FileInfo{Path: filepath.ToSlash(rel), Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}
}

// StatFile describes one entry of the workspace without following a final symlink.
func (r *Runtime) StatFile(ctx context.Context, id, p string) (sandbox.FileInfo, error) {
	rel, err := sandbox.WorkspacePath(p)
	if err != nil {
		return sandbox.FileInfo{}, fileErr("stat", id, p, err)
	}
	root, inner, _, err := r.openFor(ctx, id, rel)
	if err != nil {
		return sandbox.FileInfo{}, fileErr("stat", id, p, err)
	}
	defer root.Close()
	fi, err := root.Lstat(inner)
	if err != nil {
		return sandbox.FileInfo{}, fileErr("stat", id, p, escaped(err))
	}
	return fileInfo(rel, fi), nil
}

// ListFiles lists a workspace directory (not recursively): its first entries by name,
// at most sandbox.ListLimit(limit). The whole directory is read for names only (at most
// sandbox.MaxListScan of them, the smallest kept: smallestNames), and only the entries
// returned are stat'ed, with lstat: a 100,000-file directory costs a getdents pass, not
// 100,000 stats, and a symlink (a loop, a link to "..") is never followed.
func (r *Runtime) ListFiles(ctx context.Context, id, dir string, limit int) (sandbox.FileList, error) {
	list, err := r.listFiles(ctx, id, dir, sandbox.ListLimit(limit))
	if err != nil {
		return sandbox.FileList{}, fileErr("list", id, dir, err)
	}
	return list, nil
}

func (r *Runtime) listFiles(ctx context.Context, id, dir string, limit int) (sandbox.FileList, error) {
	rel, err := sandbox.WorkspacePath(dir)
	if err != nil {
		return sandbox.FileList{}, err
	}
	root, inner, _, err := r.openFor(ctx, id, rel)
	if err != nil {
		return sandbox.FileList{}, err
	}
	defer root.Close()
	if fi, err := root.Lstat(inner); err != nil {
		return sandbox.FileList{}, escaped(err)
	} else if !fi.IsDir() {
		return sandbox.FileList{}, fmt.Errorf("not a directory but a %s", kind(fi.Mode()))
	}
	// O_DIRECTORY and O_NOFOLLOW: a FIFO or a symlink swapped in since the Lstat is
	// refused at once, never waited on or followed.
	d, err := root.OpenFile(inner, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return sandbox.FileList{}, escaped(err)
	}
	defer d.Close()
	names, read, more, err := smallestNames(ctx, d, limit)
	if err != nil {
		return sandbox.FileList{}, err
	}
	out := make([]sandbox.FileInfo, 0, len(names))
	for _, name := range names {
		fi, err := root.Lstat(path.Join(inner, name))
		if err != nil {
			continue // removed since its name was read
		}
		out = append(out, fileInfo(path.Join(rel, name), fi))
	}
	return sandbox.FileList{Entries: out, Omitted: read - len(names), OmittedAtLeast: more}, nil
}

// listScan is sandbox.MaxListScan, lowered by a test to reach it without a million files.
var listScan = sandbox.MaxListScan

// smallestNames reads directory d's names in batches, at most listScan of them, and
// returns the n smallest, sorted; read is how many names it read, and more reports
// that the directory held names beyond the scan cap. Memory stays O(n + batch) however
// large the directory: the kept names are cut back to n whenever they pass 2n.
func smallestNames(ctx context.Context, d *os.File, n int) (names []string, read int, more bool, err error) {
	const batch = 4096
	for read < listScan {
		if err := ctx.Err(); err != nil {
			return nil, 0, false, err
		}
		got, err := d.Readdirnames(min(batch, listScan-read))
		read += len(got)
		names = append(names, got...)
		if len(names) > 2*n {
			sort.Strings(names)
			names = names[:n]
		}
		if errors.Is(err, io.EOF) || err == nil && len(got) == 0 {
			break
		}
		if err != nil {
			return nil, 0, false, err
		}
	}
	if read >= listScan {
		next, _ := d.Readdirnames(1)
		more = len(next) > 0
	}
	sort.Strings(names)
	return names[:min(n, len(names))], read, more, nil
}

// DeleteFile removes a file, symlink (not its target) or directory tree of the workspace
// or of a volume mounted in it. A volume's mount point, or a directory holding one, is
// refused: it is a mount, not a file, and removing the directory under it on the host
// would silently detach the volume from the running sandbox (the kernel unmounts what
// other namespaces mounted on a removed directory).
func (r *Runtime) DeleteFile(ctx context.Context, id, p string) error {
	rel, err := sandbox.WorkspacePath(p)
	if err != nil {
		return fileErr("delete", id, p, err)
	}
	if rel == "." {
		return fileErr("delete", id, p, errors.New("refusing to delete the workspace"))
	}
	rec, err := r.readRecord(id)
	if err != nil {
		return fileErr("delete", id, p, err)
	}
	if m := mountUnder(rec.Volumes, rel); m != "" {
		return fileErr("delete", id, p, fmt.Errorf("refusing to delete a directory that holds volume mount %s", m))
	}
	root, inner, _, err := r.openFor(ctx, id, rel)
	if err != nil {
		return fileErr("delete", id, p, err)
	}
	defer root.Close()
	if inner == "." {
		return fileErr("delete", id, p, fmt.Errorf("refusing to delete %s: a volume is mounted there (it is a mount, not a file)", path.Join(sandbox.WorkspaceDir, rel)))
	}
	if err := root.RemoveAll(inner); err != nil {
		return fileErr("delete", id, p, err)
	}
	return nil
}
