package daytonatest

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
	"syscall"
)

// A Daytona volume is a mount-s3 (Mountpoint for Amazon S3) file system: the runner
// mounts the volume's bucket with `mount-s3 --allow-other --allow-delete
// --allow-overwrite --file-mode 0666 --dir-mode 0777` (v0.190 apps/runner/pkg/docker/
// volumes_mountpaths.go:228-250), as root (apps/runner/packaging/systemd/
// daytona-runner.service: User=root), and binds it, or a subpath of it, at the mount path
// (:93-119). Mountpoint gives every file and directory those modes and its mounting
// user as owner, and never changes them (awslabs/mountpoint-s3 doc/SEMANTICS.md,
// "Permissions and metadata"): its FUSE setattr ignores the mode (mountpoint-s3-fs/src/
// fuse.rs, setattr's `_mode`), and it mounts with default_permissions
// (mountpoint-s3-fs/src/fuse/config.rs), so the kernel lets only the owner or a process
// with CAP_FOWNER chmod. A sandbox whose daemon runs as another user than root gets
// EPERM, which set_file_permissions.go:71-74 answers 400; a root one gets success and no
// change.
//
// The emulator's volumes are bind mounts of local directories with full POSIX
// semantics; s3Box, which every toolbox call of a sandbox with volumes goes through
// (guard, workspace.go), makes the file calls on paths in them answer as above: stat and
// list report 0666 files and 0777 directories, and chmod (POST /files/permissions) is
// refused, or does nothing for root. Commands are not modelled: a chmod, rename or
// append run by a command in a volume succeeds here (BEHAVIOURS.md).

// Mountpoint's modes of the runner's mount.
const (
	s3FileMode fs.FileMode = 0o666
	s3DirMode  fs.FileMode = 0o777
)

// s3Box is a sandbox's box with its volumes' mount paths answering as mount-s3.
type s3Box struct {
	box
	mounts []string // clean absolute mount paths
	root   bool     // the daemon runs as root
}

// onVolumes wraps bx for sb's volumes; a sandbox without volumes gets bx itself.
func onVolumes(bx box, sb *sbox) box {
	if len(sb.mounts) == 0 {
		return bx
	}
	s := s3Box{box: bx, root: sb.runAs == "root" || sb.runAs == "0"}
	for _, m := range sb.mounts {
		s.mounts = append(s.mounts, path.Clean(m.MountPath))
	}
	return s
}

// inVolume reports whether the file-call path p is a volume's mount path or in it (a
// relative p is relative to /workspace, as the local box reads it).
func (s s3Box) inVolume(p string) bool {
	if !path.IsAbs(p) {
		p = path.Join(servedDir, p)
	}
	p = path.Clean(p)
	for _, m := range s.mounts {
		if p == m || strings.HasPrefix(p, m+"/") {
			return true
		}
	}
	return false
}

// s3Info is fi with Mountpoint's fixed mode.
func s3Info(fi fileInfo) fileInfo {
	m := s3FileMode
	if fi.IsDir {
		m = fs.ModeDir | s3DirMode
	}
	fi.Mode, fi.Permissions = m.String(), fmt.Sprintf("%#o", m.Perm())
	return fi
}

func (s s3Box) stat(id, p string) (fileInfo, error) {
	fi, err := s.box.stat(id, p)
	if err == nil && s.inVolume(p) {
		fi = s3Info(fi)
	}
	return fi, err
}

func (s s3Box) list(id, p string) ([]fileInfo, error) {
	fis, err := s.box.list(id, p)
	for i := range fis {
		if s.inVolume(path.Join(p, fis[i].Name)) {
			fis[i] = s3Info(fis[i])
		}
	}
	return fis, err
}

func (s s3Box) chmod(id, p string, mode fs.FileMode) error {
	switch {
	case !s.inVolume(p):
		return s.box.chmod(id, p, mode)
	case s.root:
		return nil // CAP_FOWNER passes the kernel's check; Mountpoint ignores the mode
	default:
		return &fs.PathError{Op: "chmod", Path: p, Err: syscall.EPERM}
	}
}
