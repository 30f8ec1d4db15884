package daytona

import (
	"context"
	"fmt"
	"io/fs"
	pathpkg "path"
	"strings"
)

// setMode gives the file dst that WriteFile has just uploaded the mode asked for, unless
// that is the default (0 or 0644): the runtime contract (sandbox.Runtime.WriteFile) is
// that a new file gets the mode, and that rewriting an existing file keeps its mode unless
// another is asked for, as `cat > file` or an editor does. That is what the daemon's upload
// does by itself for the default (os.Create keeps an existing file's mode and makes a new
// one 0644: v0.190 apps/daemon/pkg/toolbox/fs/upload_files.go:90), so the common write is
// one request; another mode costs a second (BenchmarkWriteFile). It is set with the
// daemon's set-permissions call, which starts no process in the sandbox, rather than a
// chmod command.
//
// In a volume there is nothing to set: Daytona's volumes are mount-s3 file systems whose
// files are 0666 and directories 0777 for good (v0.190 apps/runner/pkg/docker/
// volumes_mountpaths.go:229, --file-mode 0666 --dir-mode 0777); Mountpoint ignores a
// chmod, and the kernel refuses it (EPERM, a 400 from the daemon) to any user but the
// mount's owner, root. So a file written into a volume keeps 0666, whatever mode is asked.
func (r *Runtime) setMode(ctx context.Context, id string, sb *Sandbox, dst string, mode fs.FileMode) error {
	if inVolume(sb, dst) {
		return nil
	}
	if mode == 0 || mode.Perm() == 0o644 {
		return nil
	}
	if err := r.C.SetFileMode(ctx, sb, dst, mode); err != nil {
		return fmt.Errorf("setting mode %04o: %w", mode.Perm(), r.toolboxErr(ctx, id, err))
	}
	return nil
}

// inVolume reports whether the absolute sandbox path p is in one of sb's volumes (the
// mount paths of its DTO, as it was created with them).
func inVolume(sb *Sandbox, p string) bool {
	p = pathpkg.Clean(p)
	for _, v := range sb.Volumes {
		m := pathpkg.Clean(v.MountPath)
		if p == m || strings.HasPrefix(p, m+"/") {
			return true
		}
	}
	return false
}
