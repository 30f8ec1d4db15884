//go:build linux

package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// stageVolume binds the folder b.Beneath of volume directory b.Src at b.Dst under
// stagingDir, idmapped through ns when ns is not -1. The folder is resolved with
// openat2 beneath the volume and without following any symbolic link, and bound from
// the descriptor that resolution gave: a sandbox that mounts the whole volume may have
// put a link where the folder was, and the setup step runs as root, so following it
// could bind any host directory into the sandbox.
func stageVolume(b stageBind, ns int) error {
	dir, err := unix.Open(b.Src, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("volume %s: %w", b.Src, err)
	}
	defer unix.Close(dir)
	fd := dir
	if b.Beneath != "" {
		fd, err = unix.Openat2(dir, b.Beneath, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
		})
		if err != nil {
			return fmt.Errorf("volume %s, subpath %q (a folder of the volume, never a symbolic link): %w", b.Src, b.Beneath, err)
		}
		defer unix.Close(fd)
	}
	target := filepath.Join(stagingDir, b.Dst)
	if err := os.Mkdir(target, 0o755); err != nil {
		return err
	}
	if ns < 0 {
		// The descriptor's magic link names exactly the folder resolved above.
		src := "/proc/self/fd/" + strconv.Itoa(fd)
		if err := syscall.Mount(src, target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("bind volume %s: %w", b.Src, err)
		}
		return nil
	}
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("clone mount of volume %s: %w", b.Src, err)
	}
	defer unix.Close(tree)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns)}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		return idmapError(b.Src, err)
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach idmapped volume %s: %w", b.Src, err)
	}
	return nil
}
