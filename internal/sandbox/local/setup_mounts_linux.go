//go:build linux

package local

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// dropForeignMounts detaches, in a build's setup step's mount namespace (unshare's
// private copy of the host's; a sandbox's leaves the host's mounts at once: leaveHost),
// every loop-backed ext4 mount outside the staging directory: the disk
// images and volumes of other sandboxes, of this runtime or of any other on the host, and
// this sandbox's own once staged. Everything bwrap binds comes from the staging directory,
// bound before this runs, so the sandbox loses nothing; without it the copy pins each of
// those file systems for this sandbox's life, so that a volume's loop device stays
// attached after the host unmounts it and growing it offline (growVolume) is refused
// while any sandbox of anyone runs. The detach is private to this namespace (unshare's
// propagation is private): the host keeps its mounts.
func dropForeignMounts() {
	mounts, err := readMounts()
	if err != nil {
		return
	}
	var targets []string
	for _, m := range mounts {
		if m.FSType != "ext4" || !strings.HasPrefix(m.Source, "/dev/loop") ||
			m.Point == stagingDir || strings.HasPrefix(m.Point, stagingDir+"/") {
			continue
		}
		targets = append(targets, m.Point)
	}
	// The deepest first, so that a mount inside another goes before it.
	sort.Slice(targets, func(i, j int) bool { return len(targets[i]) > len(targets[j]) })
	for _, mp := range targets {
		_ = syscall.Unmount(mp, syscall.MNT_DETACH)
	}
}

// leaveHost replaces this namespace's copy of the host's mounts by a root of its own
// that holds only what bwrap needs at the paths it is given: the staging directory at
// stagingDir (a recursive clone of it), the host's /usr, /proc and /dev, its /bin and
// /lib* links, bwrap itself, and an empty /tmp (bwrap's base directory); the rest goes
// in one recursive detach of the old root. dropForeignMounts does the same for the
// loop-backed file systems, but with one unmount each, every one under the kernel's
// global namespace lock, so that its cost grew with the file systems mounted on the host
// (28 ms with another suite's sandbox disks mounted); and bwrap, which reads this
// namespace's mount table for each of its binds, now reads a short one. The new root is
// seen by this process and bwrap only: bwrap leaves it for the sandbox's own root, and
// detaches it, before it runs anything of the sandbox.
func leaveHost(bwrap string) error {
	staged, err := unix.OpenTree(unix.AT_FDCWD, stagingDir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("clone the staging directory: %w", err)
	}
	defer unix.Close(staged)
	// The staging tmpfs's mount point is the new root's: nothing else there is needed.
	if err := unix.Unmount(stagingDir, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the staging directory: %w", err)
	}
	root := stagingDir
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("new root tmpfs on %s: %w", root, err)
	}
	if err := populateRoot(root, staged, bwrap); err != nil {
		return err
	}
	if err := unix.PivotRoot(root, filepath.Join(root, oldRootDir)); err != nil {
		return fmt.Errorf("pivot_root to %s: %w", root, err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/"+oldRootDir, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host's mounts: %w", err)
	}
	return nil
}

// oldRootDir is where pivot_root puts the host's root before it is detached.
const oldRootDir = "old"

// populateRoot fills the new root at root: the staging clone (a detached mount tree,
// descriptor staged) at stagingDir inside it, and binds of the host paths bwrap uses.
func populateRoot(root string, staged int, bwrap string) error {
	for _, d := range []string{oldRootDir, "tmp", strings.TrimPrefix(stagingDir, "/")} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	if err := unix.MoveMount(staged, "", unix.AT_FDCWD, filepath.Join(root, stagingDir), unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach the staging directory: %w", err)
	}
	// /usr: bwrap, its loader and libraries; /proc: bwrap's own use and the sandbox's
	// masked /proc files (procMaskArgs); /dev: the device nodes of bwrap's --dev.
	for _, d := range []string{"/usr", "/proc", "/dev"} {
		if err := bindInto(root, d, true); err != nil {
			return err
		}
	}
	for _, l := range hostRootLinks("/") {
		var err error
		if l.target != "" {
			err = os.Symlink(l.target, filepath.Join(root, l.name))
		} else {
			err = bindInto(root, "/"+l.name, true)
		}
		if err != nil {
			return err
		}
	}
	// The dynamic loader's cache, so that bwrap's libraries are found where the host's
	// configuration puts them, not only in the loader's default directories.
	if _, err := os.Stat(ldCache); err == nil {
		if err := bindInto(root, ldCache, false); err != nil {
			return err
		}
	}
	// bwrap itself, when the paths above do not give it.
	if _, err := os.Stat(filepath.Join(root, bwrap)); err == nil {
		return nil
	}
	return bindInto(root, bwrap, false)
}

const ldCache = "/etc/ld.so.cache"

// bindInto binds host path p (a directory when dir) at the same path under root. Its
// top directory must be new in root: the directories and file made for the bind are
// then in root's own tmpfs, never through a bind or a link into a host directory.
func bindInto(root, p string, dir bool) error {
	top, _, _ := strings.Cut(strings.TrimPrefix(filepath.Clean(p), "/"), "/")
	if _, err := os.Lstat(filepath.Join(root, top)); err == nil {
		return fmt.Errorf("bind %s into the new root: /%s is there already", p, top)
	}
	target := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	if dir {
		if err := os.Mkdir(target, 0o755); err != nil {
			return err
		}
	} else {
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o555)
		if err != nil {
			return err
		}
		f.Close()
	}
	if err := unix.Mount(p, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s into the new root: %w", p, err)
	}
	return nil
}
