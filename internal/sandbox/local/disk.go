//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// A sandbox with Limits.DiskMB, on a runtime running as root, keeps data/ on an ext4
// image of that size (disk.img, sparse) loop-mounted on the host at data/. The mount is
// made at Create and whenever it is found missing (after a reboot, or a sweep), and is
// removed at Archive and Delete. The image has no journal and no reserved blocks: the
// whole size is the sandbox's.

// makeDiskImage creates an image of mb MiB at img and mounts it on mnt.
func makeDiskImage(ctx context.Context, img, mnt string, mb int64) error {
	if err := newExt4Image(ctx, img, mb); err != nil {
		return err
	}
	return mountImage(ctx, img, mnt)
}

// newExt4Image creates a sparse ext4 image of mb MiB at img, which must not exist, with
// no journal and no reserved blocks (the whole size is its user's), its root owned by
// the runtime's user as a plain directory would be. The sandbox disk and sized volumes
// are made so; on failure nothing is left at img.
func newExt4Image(ctx context.Context, img string, mb int64) error {
	f, err := os.OpenFile(img, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(mb << 20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		var out []byte
		out, err = exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal",
			"-E", "lazy_itable_init=1,root_owner="+strconv.Itoa(os.Getuid())+":"+strconv.Itoa(os.Getgid()), img).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("mkfs.ext4: %v: %s", err, strings.TrimSpace(string(out)))
		}
	}
	if err != nil {
		_ = os.Remove(img)
	}
	return err
}

func mountImage(ctx context.Context, img, mnt string) error {
	if err := mountExt4(ctx, img, mnt); err != nil {
		return fmt.Errorf("mount the sandbox disk image: %w", err)
	}
	return nil
}

// mountExt4 loop-mounts ext4 image img on mnt (nosuid, nodev) and removes the
// lost+found folder mkfs made, which is not the sandbox's.
func mountExt4(ctx context.Context, img, mnt string) error {
	out, err := exec.CommandContext(ctx, "mount", "-t", "ext4", "-o", "loop,nosuid,nodev", img, mnt).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	_ = os.Remove(filepath.Join(mnt, "lost+found"))
	return nil
}

// isMountPoint reports whether dir is on another filesystem than its parent.
func isMountPoint(dir string) bool {
	var a, b syscall.Stat_t
	if syscall.Stat(dir, &a) != nil || syscall.Stat(filepath.Dir(dir), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}

// unmountData unmounts the disk image of a sandbox directory, if mounted.
func (r *Runtime) unmountData(dir string) error {
	data := filepath.Join(dir, "data")
	if !isMountPoint(data) {
		return nil
	}
	if out, err := exec.Command("umount", data).CombinedOutput(); err != nil {
		// Busy: a process of a keeper being torn down may still hold it; detach it now,
		// the kernel frees it once the last user is gone.
		if out2, err2 := exec.Command("umount", "-l", data).CombinedOutput(); err2 != nil {
			return fmt.Errorf("unmount %s: %v: %s %s", data, err, out, out2)
		}
	}
	return nil
}

// ensureData makes sure the sandbox's data/ is there: the image mounted when it has one.
func (r *Runtime) ensureData(ctx context.Context, id string, rec record) error {
	data := r.dataDir(id)
	img := filepath.Join(r.dir(id), "disk.img")
	if _, err := os.Stat(img); err == nil {
		if !isMountPoint(data) {
			if os.Geteuid() != 0 {
				return errors.New("the sandbox's disk image is not mounted and only root can mount it")
			}
			if err := mountImage(ctx, img, data); err != nil {
				return err
			}
		}
	}
	if _, err := os.Stat(filepath.Join(data, "workspace")); err != nil {
		if rec.Status == sandbox.SandboxArchived {
			return fmt.Errorf("sandbox %s is archived: %w", id, sandbox.ErrStopped)
		}
		return fmt.Errorf("sandbox %s: its files are missing: %w", id, sandbox.ErrLost)
	}
	return nil
}
