//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// A volume with a size is kept, as a sandbox's disk is (disk.go), on an ext4 image of
// that size (<volumes>/<name>.img, sparse: it costs what was written), loop-mounted
// nosuid,nodev on the host at the volume's directory. A sandbox that writes past it
// gets ENOSPC from the write, and the host filesystem (which holds the database and
// the snapshots) is not filled. One mount per volume serves every sandbox that mounts
// it, so two sessions share one filesystem (two loop mounts of one image would corrupt
// it); it is made when the volume is created and whenever a sandbox finds it missing
// (after a reboot), and removed when the volume is deleted.
//
// Only a root runtime can mount an image, and an image on a shared snapshot directory
// (SharedDirEnv) could be mounted by two machines at once, which ext4 does not survive.
// There the volume is a plain directory and its size is not enforced: volumeSizeUnenforced
// says why, the provider warns at plan, and with require_limits the volume is refused
// at creation, as the sandbox limits are (limits.go). A sandbox mounting a plain
// directory volume says so on its event (UnenforcedVolumes).

// volumeImage is the image file of volume directory dir.
func volumeImage(dir string) string { return dir + ".img" }

// volumeLock is the lock file that serializes making and mounting volume dir's image
// between the processes of this host.
func volumeLock(dir string) string { return dir + ".lock" }

// volumeSizeUnenforced says why a volume of a store rooted at volumes (shared: on a
// shared snapshot directory) created by this process gets no size limit, or "".
func volumeSizeUnenforced(shared bool) string {
	switch {
	case shared:
		return "the volumes live on the shared snapshot directory (" + SharedDirEnv + "), which several machines mount: " +
			"a loop-mounted image there would be corrupted by two machines mounting it at once, so a volume is a plain directory " +
			"whose size only the shared filesystem's own quota can cap"
	case os.Geteuid() != 0:
		return fmt.Sprintf("running as uid %d: only root can loop-mount the ext4 image that caps a volume, so the volume is a plain "+
			"directory on the host filesystem and a sandbox may fill it", os.Geteuid())
	}
	for _, t := range []string{"mkfs.ext4", "mount", "umount"} {
		if _, err := findTool(t); err != nil {
			return t + " (e2fsprogs, util-linux) is not installed: the volume cannot be kept on an image of its size, so it is a plain directory"
		}
	}
	return ""
}

// withVolumeLock runs f holding volume dir's lock.
func withVolumeLock(dir string, f func() error) error {
	lf, err := os.OpenFile(volumeLock(dir), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	// Closing the file releases the lock too, so an unlock that fails loses nothing.
	defer func() { _ = syscall.Flock(int(lf.Fd()), syscall.LOCK_UN) }()
	return f()
}

// makeVolumeImage makes volume dir's image of mb MiB, unless it has one, and mounts it.
// A directory that already holds files (a volume of an earlier release, a plain
// directory) keeps them and gets no image: mounting one over it would hide them.
func makeVolumeImage(ctx context.Context, dir string, mb int64) error {
	return withVolumeLock(dir, func() error {
		img := volumeImage(dir)
		if _, err := os.Stat(img); err == nil {
			return mountVolume(ctx, dir)
		}
		if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
			return err
		}
		// Its root is the runtime's user's, as the plain directory's is; sandboxes see
		// it as their own through the idmapped bind.
		if err := newExt4Image(ctx, img, mb); err != nil {
			return err
		}
		if err := mountVolume(ctx, dir); err != nil {
			_ = os.Remove(img)
			return err
		}
		return nil
	})
}

// mountVolume mounts volume dir's image on dir unless it is mounted (the lock held).
func mountVolume(ctx context.Context, dir string) error {
	if isMountPoint(dir) {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("volume %s: its image is not mounted and only root can mount it; start the harness as root once, or ask root to", filepath.Base(dir))
	}
	if err := mountExt4(ctx, volumeImage(dir), dir); err != nil {
		return fmt.Errorf("mount the image of volume %s: %w", filepath.Base(dir), err)
	}
	return nil
}

// ensureVolumeMounted mounts volume dir's image when it has one and it is not mounted.
func ensureVolumeMounted(ctx context.Context, dir string) error {
	if _, err := os.Stat(volumeImage(dir)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if isMountPoint(dir) {
		return nil
	}
	return withVolumeLock(dir, func() error { return mountVolume(ctx, dir) })
}

// unmountVolume unmounts volume dir's image if mounted (lazily when a sandbox still
// holds it: the kernel frees it with the last user).
func unmountVolume(dir string) error {
	if !isMountPoint(dir) {
		return nil
	}
	if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
		if out2, err2 := exec.Command("umount", "-l", dir).CombinedOutput(); err2 != nil {
			return fmt.Errorf("unmount volume %s: %v: %s %s", filepath.Base(dir), err, out, out2)
		}
	}
	return nil
}

// hasVolumeImage reports whether volume dir is kept on an image (its size enforced).
func hasVolumeImage(dir string) bool {
	_, err := os.Stat(volumeImage(dir))
	return err == nil
}

// UnenforcedVolumes lists the volumes of mounts whose size a sandbox of this runtime
// would not be held to (a plain directory: volumeSizeUnenforced), as UnenforcedLimits
// does for the sandbox's own limits (sandbox.VolumeLimitReporter).
func (r *Runtime) UnenforcedVolumes(mounts []sandbox.VolumeMount) []sandbox.UnenforcedLimit {
	vs := volumeStore{dir: volumesDir(r.b.root)}
	var out []sandbox.UnenforcedLimit
	seen := map[string]bool{}
	for _, m := range mounts {
		dir, err := vs.path(m.Volume)
		if err != nil || seen[m.Volume] || hasVolumeImage(dir) {
			continue
		}
		seen[m.Volume] = true
		out = append(out, sandbox.UnenforcedLimit{Limit: "volume", Reason: fmt.Sprintf(
			"volume %s has no size limit: it is a plain directory on the host filesystem (a volume gets an image of its size only when "+
				"created by a root runtime with e2fsprogs, outside a shared snapshot directory, by this release or later)", m.Volume)})
	}
	return out
}

// Grow makes volume id's image sizeMB large, in place: the image file is extended and
// its filesystem grown. A mounted volume is grown online through its loop device, which
// needs root with CAP_SYS_RESOURCE; where that is refused (a container without it) it is
// unmounted, grown offline and mounted again, which works once no running sandbox holds
// it, else Grow fails saying so and the volume keeps its size. A volume kept as a plain
// directory has no size to grow; nothing shrinks here (the provider replaces a volume
// made smaller).
func (s volumeStore) Grow(ctx context.Context, id string, sizeMB int64) error {
	dir, err := s.path(id)
	if err != nil {
		return err
	}
	if !hasVolumeImage(dir) {
		return nil
	}
	return withVolumeLock(dir, func() error {
		img := volumeImage(dir)
		fi, err := os.Stat(img)
		if err != nil {
			return err
		}
		old := fi.Size()
		if old >= sizeMB<<20 {
			return nil
		}
		if isMountPoint(dir) {
			if os.Geteuid() != 0 {
				return fmt.Errorf("local: volume %s is mounted, and only root can grow a mounted volume", id)
			}
			online := growOnline(ctx, dir, img, old, sizeMB<<20)
			if online == nil {
				return nil
			}
			// Offline, but only once nothing else holds the filesystem: a sandbox's
			// mount namespace keeps it (and so its loop device) alive after the host's
			// mount is gone, and checking a live filesystem would corrupt it.
			dev, derr := mountSource(dir)
			if derr != nil {
				return derr
			}
			if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
				return fmt.Errorf("local: growing volume %s: unmount: %v: %s", id, err, strings.TrimSpace(string(out)))
			}
			if loopAttached(dev, img) {
				// Put the host's mount back on the same device (the same filesystem).
				if out, err := exec.Command("mount", "-t", "ext4", "-o", "nosuid,nodev", dev, dir).CombinedOutput(); err != nil {
					return fmt.Errorf("local: volume %s: mounting it again: %v: %s", id, err, strings.TrimSpace(string(out)))
				}
				return fmt.Errorf("local: volume %s cannot grow while running sandboxes mount it (online resizing: %v): "+
					"stop or delete those sandboxes (idle ones stop by themselves) and apply again", id, online)
			}
			defer func() {
				if merr := mountVolume(ctx, dir); merr != nil && err == nil {
					err = merr
				}
			}()
		}
		if err = os.Truncate(img, sizeMB<<20); err != nil {
			return fmt.Errorf("local: growing volume %s: %w", id, err)
		}
		for _, st := range [][]string{{"e2fsck", "-f", "-p", img}, {"resize2fs", img}} {
			out, cerr := exec.CommandContext(ctx, st[0], st[1:]...).CombinedOutput()
			var ee *exec.ExitError
			if st[0] == "e2fsck" && errors.As(cerr, &ee) && ee.ExitCode() == 1 {
				cerr = nil // 1: "errors corrected", such as the lost+found that mountVolume removes
			}
			if cerr != nil {
				err = fmt.Errorf("local: growing volume %s: %s: %v: %s", id, st[0], cerr, strings.TrimSpace(string(out)))
				return err
			}
		}
		return err
	})
}

// growOnline grows the mounted image img of volume dir from old to size bytes through
// its loop device; on failure the image is put back to its old size (the filesystem
// never used the added space).
func growOnline(ctx context.Context, dir, img string, old, size int64) error {
	dev, err := mountSource(dir)
	if err != nil {
		return err
	}
	if err := os.Truncate(img, size); err != nil {
		return err
	}
	err = nil
	for _, st := range [][]string{{"losetup", "-c", dev}, {"resize2fs", dev}} {
		if out, cerr := exec.CommandContext(ctx, st[0], st[1:]...).CombinedOutput(); cerr != nil {
			err = fmt.Errorf("%s: %v: %s", st[0], cerr, lastLine(string(out)))
			break
		}
	}
	if err != nil {
		_ = os.Truncate(img, old)
		_ = exec.Command("losetup", "-c", dev).Run()
	}
	return err
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for _, l := range lines {
		if strings.Contains(l, "denied") || strings.Contains(l, "rror") {
			return strings.TrimSpace(l)
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}

// loopAttached reports whether loop device dev still serves image img, waiting a
// moment for the kernel to let it go after an unmount (autoclear).
func loopAttached(dev, img string) bool {
	f := filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file")
	for range 50 {
		b, err := os.ReadFile(f)
		if err != nil || strings.TrimSpace(string(b)) != img {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// mountSource is the device mounted at dir, from this process's mountinfo.
func mountSource(dir string) (string, error) {
	mounts, err := readMounts()
	if err != nil {
		return "", err
	}
	src := ""
	for _, m := range mounts {
		if m.Point == dir {
			src = m.Source // the last mount at dir is the one seen
		}
	}
	if !strings.HasPrefix(src, "/dev/loop") {
		return "", fmt.Errorf("the volume at %s is not mounted from a loop device (%q)", dir, src)
	}
	return src, nil
}
