//go:build linux

package local

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Archive stops the sandbox and packs what it keeps (the overlay upper directories and
// the workspace, data/ minus the overlay workdirs) into archives/<id>.tar.gz, then frees
// data/ (and the disk image). Start restores it. The tar keeps what an overlay upper
// directory needs: whiteouts (0/0 character devices), user.* extended attributes (the
// userxattr opaque markers), hard links, modes, times and, as root, owners.
//
// A tar holds each file's apparent size, holes included, so a sparse file that costs
// the sandbox no disk would cost the archiver its whole size in reading and compressing
// (a 16 MiB disk image takes sparse files of terabytes). Before reading anything,
// Archive adds up the apparent sizes and refuses a sandbox whose files hold more than
// it could really store (archiveBound); the sandbox is then left Stopped with its files
// intact. Restore writes blocks of zeros as holes, so a sparse file comes back sparse
// (and fits the disk it fitted before).
func (r *Runtime) Archive(ctx context.Context, id string) error {
	return r.lifecycleStep(id, "archive", func(rec record) error { return r.archive(ctx, id, rec) })
}

func (r *Runtime) archive(ctx context.Context, id string, rec record) error {
	if rec.Status == sandbox.SandboxArchived {
		return nil
	}
	if err := r.halt(ctx, id, &rec); err != nil {
		return err
	}
	if err := r.ensureData(ctx, id, rec); err != nil {
		return err
	}
	if err := r.checkArchiveSize(ctx, id, rec); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(r.tmpDir(), "archive-"+id+"-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	err = packDir(ctx, tmp, r.dataDir(id), rec.IDs)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), r.archivePath(id)); err != nil {
		return err
	}
	// The archive is complete: record it before freeing anything, so that a crash from
	// here on leaves an Archived sandbox whose leftovers the next Start replaces.
	rec.Status = sandbox.SandboxArchived
	slot := rec.IDs
	rec.IDs = nil // the archive holds the ids as seen inside; Start takes a slot anew
	if err := writeRecord(r.dir(id), rec); err != nil {
		return err
	}
	if err := r.freeData(id); err != nil {
		return err
	}
	if slot != nil && r.b.ids != nil {
		r.b.ids.release(*slot, r.dir(id))
	}
	return nil
}

// archiveBound is the most that the regular files of a sandbox may add up to (apparent
// sizes) for Archive to pack them, with its description for the error.
//
//   - A sandbox with a disk image (DiskMB, as root): DiskMB. The image cannot hold more
//     real data, so whatever is beyond it is holes.
//   - Otherwise (no disk cap, or DiskMB as RLIMIT_FSIZE, which caps each file but not
//     their total): the size of the filesystem holding data/. No sandbox can really
//     store more there, and up to it archiving costs what archiving a sandbox that
//     really filled the filesystem would: the sparse file gains it nothing. Not the
//     free space: it changes with other users of the filesystem, which would make
//     archiving one sandbox fail or not depending on its neighbours.
func (r *Runtime) archiveBound(id string, rec record) (int64, string, error) {
	if rec.Limits.DiskMB > 0 && r.limits.diskImage {
		return rec.Limits.DiskMB << 20, fmt.Sprintf("its disk cap of %d MiB (limits.disk_mb)", rec.Limits.DiskMB), nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(r.dataDir(id), &st); err != nil {
		return 0, "", err
	}
	unit := st.Frsize
	if unit <= 0 {
		unit = st.Bsize
	}
	size := int64(st.Blocks) * int64(unit) //nolint:unconvert // int32 fields on 32-bit Linux
	return size, fmt.Sprintf("the %d MiB of the filesystem holding it", size>>20), nil
}

// checkArchiveSize refuses to archive a sandbox whose regular files add up to more than
// archiveBound. It reads metadata only.
func (r *Runtime) checkArchiveSize(ctx context.Context, id string, rec record) error {
	bound, what, err := r.archiveBound(id, rec)
	if err != nil {
		return err
	}
	total, err := apparentSize(ctx, r.dataDir(id))
	if err != nil {
		return err
	}
	if total <= bound {
		return nil
	}
	return fmt.Errorf("refused: its files add up to %d MiB (apparent size: the holes of sparse files count, "+
		"as an archive stores them in full), more than %s; the sandbox is stopped with its files intact: "+
		"start it, delete or shrink (truncate) its sparse files, and archive it again", total>>20, what)
}

// archived reports whether packDir keeps the entry rel of data/.
func archived(rel string) bool { return rel != "work" && rel != "lost+found" && rel != "tmp" }

// apparentSize adds up the sizes of the regular files packDir would archive from dir,
// each hard-linked file once.
func apparentSize(ctx context.Context, dir string) (int64, error) {
	var total int64
	seen := map[[2]uint64]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if !archived(filepath.ToSlash(rel)) {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Nlink > 1 {
			key := [2]uint64{st.Dev, st.Ino}
			if seen[key] {
				return nil
			}
			seen[key] = true
		}
		if total += fi.Size(); total < 0 {
			total = math.MaxInt64 // overflow: more than any bound anyway
			return filepath.SkipAll
		}
		return nil
	})
	return total, err
}

// freeData removes data/ (unmounting and removing the disk image first).
func (r *Runtime) freeData(id string) error {
	if err := r.unmountData(r.dir(id)); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(r.dir(id), "disk.img"))
	trash, err := os.MkdirTemp(r.tmpDir(), "data-"+id+"-")
	if err != nil {
		return err
	}
	if err := os.Rename(r.dataDir(id), filepath.Join(trash, "data")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := removeAll(trash); err != nil {
		return err
	}
	return os.Mkdir(r.dataDir(id), 0o700)
}

// restore unpacks an archived sandbox's data/ (onto a new disk image if it has a disk
// limit), into a new id slot on a root runtime (set in rec). The caller holds the
// sandbox lock exclusively and records the new status.
func (r *Runtime) restore(ctx context.Context, id string, rec *record) error {
	if r.b.ids != nil && rec.IDs == nil {
		slot, err := r.b.ids.claim(r.dir(id))
		if err != nil {
			return err
		}
		rec.IDs = &slot
	}
	f, err := os.Open(r.archivePath(id))
	if err != nil {
		return fmt.Errorf("open archive: %w", err)
	}
	defer f.Close()
	// Leftovers of an interrupted archive or restore go first.
	if err := r.freeData(id); err != nil {
		return err
	}
	if rec.Limits.DiskMB > 0 && r.limits.diskImage {
		if err := makeDiskImage(ctx, filepath.Join(r.dir(id), "disk.img"), r.dataDir(id), rec.Limits.DiskMB); err != nil {
			return err
		}
	}
	if err := unpackDir(ctx, f, r.dataDir(id), rec.IDs); err != nil {
		return fmt.Errorf("restore archive: %w", err)
	}
	if rec.IDs != nil {
		// The overlays' roots are the slot's root's, whatever an old archive says.
		for _, d := range []string{"upper", "upper/usr", "upper/rest"} {
			if err := os.Lchown(filepath.Join(r.dataDir(id), d), int(rec.IDs.UID), int(rec.IDs.GID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return os.MkdirAll(filepath.Join(r.dataDir(id), "work"), 0o700)
}

// archiveIDsKey is a PAX record of the archive's first (global) header: "inner" when
// owners are stored as seen inside the sandbox (its id slot's ids taken back to 0..), as
// archives of a root runtime are since sandboxes have slots. An archive without it holds
// host ids: those of an unprivileged runtime (not restored to their owners), or of a
// root runtime from before slots, whose sandbox user was host root (restored with root's
// files given to the sandbox user, as ensureSlot does).
const archiveIDsKey = "TRUEFORGE.ids"

// packDir writes dir (without its work/ and tmp/ directories) as a gzip-compressed tar
// to w; owners in the slot ids (nil: none) are stored as seen inside.
func packDir(ctx context.Context, w io.Writer, dir string, ids *idRange) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	if ids != nil {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Format: tar.FormatPAX,
			PAXRecords: map[string]string{archiveIDsKey: "inner"}}); err != nil {
			return err
		}
	}
	inner := func(uid, gid uint32) (uint32, uint32) { return uid, gid }
	if ids != nil {
		f := fromSlot(*ids)
		inner = func(uid, gid uint32) (uint32, uint32) { u, g, _ := f(uid, gid); return u, g }
	}
	links := map[[2]uint64]string{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !archived(rel) {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		uid, gid := inner(st.Uid, st.Gid)
		hdr := &tar.Header{Name: rel, Mode: int64(fi.Mode().Perm() | fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)),
			Uid: int(uid), Gid: int(gid), ModTime: fi.ModTime(), Format: tar.FormatPAX}
		// tar mode bits for setuid/setgid/sticky
		hdr.Mode = int64(st.Mode & 0o7777)
		switch {
		case fi.Mode().IsDir():
			hdr.Typeflag = tar.TypeDir
		case fi.Mode()&fs.ModeSymlink != 0:
			hdr.Typeflag = tar.TypeSymlink
			if hdr.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.Mode()&fs.ModeCharDevice != 0:
			hdr.Typeflag = tar.TypeChar
			hdr.Devmajor, hdr.Devminor = int64(major(st.Rdev)), int64(minor(st.Rdev))
		case fi.Mode()&fs.ModeDevice != 0:
			hdr.Typeflag = tar.TypeBlock
			hdr.Devmajor, hdr.Devminor = int64(major(st.Rdev)), int64(minor(st.Rdev))
		case fi.Mode()&fs.ModeNamedPipe != 0:
			hdr.Typeflag = tar.TypeFifo
		case fi.Mode().IsRegular():
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := links[key]; ok && st.Nlink > 1 {
				hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
			} else {
				hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
				if st.Nlink > 1 {
					links[key] = rel
				}
			}
		default:
			return nil // sockets are not kept
		}
		if hdr.Typeflag != tar.TypeSymlink {
			hdr.PAXRecords = userXattrs(p)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
			if err != nil {
				return err
			}
			_, err = io.CopyN(tw, ctxReader{ctx, f}, hdr.Size)
			f.Close()
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			if err != nil {
				return fmt.Errorf("%s changed while being archived: %w", rel, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// ctxReader is r, failing once ctx is done: a large file is not read to its end after
// the archive or restore was cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func major(dev uint64) uint32 { return uint32((dev>>8)&0xfff) | uint32((dev>>32)&^0xfff) }
func minor(dev uint64) uint32 { return uint32(dev&0xff) | uint32((dev>>12)&^0xff) }
func mkdev(major, minor uint32) int {
	return int(uint64(minor&0xff) | uint64(major&0xfff)<<8 | uint64(minor&^0xff)<<12 | uint64(major&^0xfff)<<32)
}

const xattrPrefix = "SCHILY.xattr."

// userXattrs returns the user.* extended attributes of p as PAX records.
func userXattrs(p string) map[string]string {
	buf := make([]byte, 4096)
	n, err := syscall.Listxattr(p, buf)
	if err != nil || n <= 0 {
		return nil
	}
	var out map[string]string
	for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		if !strings.HasPrefix(name, "user.") {
			continue
		}
		val := make([]byte, 4096)
		m, err := syscall.Getxattr(p, name, val)
		if err != nil {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[xattrPrefix+name] = string(val[:m])
	}
	return out
}

// unpackDir extracts a packDir archive into the empty directory dir. Every path goes
// through os.Root, so no entry lands outside dir whatever the archive holds. As root,
// owners are restored: into the id slot ids when there is one (see archiveIDsKey).
func unpackDir(ctx context.Context, r io.Reader, dir string, ids *idRange) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(zr)
	type dirTime struct {
		name string
		hdr  *tar.Header
	}
	var dirs []dirTime
	asRoot := os.Geteuid() == 0
	innerIDs := false
	owner := func(uid, gid int) (int, int, bool) {
		if ids == nil {
			return uid, gid, true
		}
		if uid < 0 || gid < 0 || uid >= idsPerSlot || gid >= idsPerSlot {
			return 0, 0, false // not an id of the sandbox: left to root
		}
		if !innerIDs {
			// Host ids of a runtime from before slots: root's files were the sandbox
			// user's.
			if uid == 0 {
				uid = sandboxUIDn
			}
			if gid == 0 {
				gid = sandboxUIDn
			}
		}
		return int(ids.hostUID(uint32(uid))), int(ids.hostGID(uint32(gid))), true
	}
	buf := make([]byte, sparseBuf)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			innerIDs = hdr.PAXRecords[archiveIDsKey] == "inner"
			continue
		}
		name := path.Clean(hdr.Name)
		if name == "." || path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("archive entry %q is outside the sandbox", hdr.Name)
		}
		made, err := unpackEntry(ctx, root, tr, hdr, name, buf)
		if err != nil {
			return err
		}
		if !made {
			continue // a hard link (its target has its attributes) or a type not kept
		}
		if hdr.Typeflag == tar.TypeDir {
			dirs = append(dirs, dirTime{name, hdr})
		}
		if asRoot {
			if uid, gid, ok := owner(hdr.Uid, hdr.Gid); ok {
				if err := root.Lchown(name, uid, gid); err != nil {
					return err
				}
			}
		}
		if hdr.Typeflag == tar.TypeSymlink {
			continue
		}
		if err := setXattrs(root, name, hdr.PAXRecords); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeDir {
			if err := root.Chmod(name, fs.FileMode(hdr.Mode&0o777)|tarSpecial(hdr.Mode)); err != nil {
				return err
			}
			_ = root.Chtimes(name, hdr.ModTime, hdr.ModTime)
		}
	}
	// Directories last, deepest first: their modes may forbid writing into them and
	// their times change with every entry made in them.
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		if err := root.Chmod(d.name, fs.FileMode(d.hdr.Mode&0o777)|tarSpecial(d.hdr.Mode)); err != nil {
			return err
		}
		_ = root.Chtimes(d.name, d.hdr.ModTime, d.hdr.ModTime)
	}
	return nil
}

// unpackEntry makes the archive entry hdr at name in root, the file's content read from
// tr. made is false for an entry whose attributes are not to be set after: a hard link
// (its target has them) or a type an archive does not keep. A directory is made
// writable (0700); unpackDir sets its mode last.
func unpackEntry(ctx context.Context, root *os.Root, tr *tar.Reader, hdr *tar.Header, name string, buf []byte) (made bool, err error) {
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return false, err
		}
	case tar.TypeReg:
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return false, err
		}
		err = writeSparse(f, ctxReader{ctx, tr}, hdr.Size, buf)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return false, err
		}
	case tar.TypeLink:
		return false, root.Link(path.Clean(hdr.Linkname), name)
	case tar.TypeSymlink:
		if err := root.Symlink(hdr.Linkname, name); err != nil {
			return false, err
		}
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		if err := mknodIn(root, name, hdr); err != nil {
			return false, err
		}
	default:
		return false, nil
	}
	return true, nil
}

// mknodIn makes the device or FIFO entry hdr at name in root.
func mknodIn(root *os.Root, name string, hdr *tar.Header) error {
	parent, err := root.Open(path.Dir(name))
	if err != nil {
		return err
	}
	defer parent.Close()
	m := uint32(syscall.S_IFIFO)
	if hdr.Typeflag == tar.TypeChar {
		m = syscall.S_IFCHR
	} else if hdr.Typeflag == tar.TypeBlock {
		m = syscall.S_IFBLK
	}
	mode := uint32(hdr.Mode & 0o777)
	if err := syscall.Mknodat(int(parent.Fd()), path.Base(name), m|mode, mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor))); err != nil {
		return fmt.Errorf("mknod %s: %w", name, err)
	}
	return nil
}

// Restored files are written in sparseBlock blocks, and a block of zeros is left a hole.
const (
	sparseBlock = 4096
	sparseBuf   = 64 * sparseBlock
)

var zeroBlock [sparseBlock]byte

// writeSparse copies the size bytes of r into the new, empty file f, leaving holes where
// whole blocks are zero (whether they were holes or written zeros: the content is the
// same), so that a sparse file takes no more disk than it did.
func writeSparse(f *os.File, r io.Reader, size int64, buf []byte) error {
	for off := int64(0); off < size; {
		n := int(min(int64(len(buf)), size-off))
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return err
		}
		for i := 0; i < n; {
			end := min(i+sparseBlock, n)
			if bytes.Equal(buf[i:end], zeroBlock[:end-i]) {
				i = end
				continue
			}
			// A run of blocks with data, written at once.
			for end < n {
				next := min(end+sparseBlock, n)
				if bytes.Equal(buf[end:next], zeroBlock[:next-end]) {
					break
				}
				end = next
			}
			if _, err := f.WriteAt(buf[i:end], off+int64(i)); err != nil {
				return err
			}
			i = end
		}
		off += int64(n)
	}
	// The size, for a file that ends in a hole.
	return f.Truncate(size)
}

func tarSpecial(mode int64) fs.FileMode {
	var m fs.FileMode
	if mode&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if mode&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// setXattrs restores user.* attributes through a descriptor opened inside the root.
func setXattrs(root *os.Root, name string, pax map[string]string) error {
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for k, v := range pax {
		attr, ok := strings.CutPrefix(k, xattrPrefix)
		if !ok || !strings.HasPrefix(attr, "user.") {
			continue
		}
		if f == nil {
			var err error
			if f, err = root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|oPath, 0); err != nil {
				return err
			}
		}
		// setxattr on the magic link reaches the file itself.
		if err := syscall.Setxattr("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), attr, []byte(v), 0); err != nil {
			return fmt.Errorf("restore %s of %s: %w", attr, name, err)
		}
	}
	return nil
}
