package sandbox

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Volumes and private registries (trueforge_volume, trueforge_registry): objects of a
// sandbox provider that outlive sandboxes. A backend keeps them with Backend.Volumes and
// Backend.Registries; the control plane stores each one's backend id, and the harness
// mounts an environment's volumes through CreateRequest.Volumes.

// Limits and rules of volumes, the same on every backend so that an environment can move
// between providers: at most MaxVolumes per environment, names as VolumeNameRule.
const (
	MaxVolumes     = 8
	VolumeNameRule = "1 to 63 characters: lower-case letters, digits, '-' and '_', starting and ending with a letter or digit"
)

var volumeName = lazyRegexp(`^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$`)

// CheckVolumeName reports a volume name that breaks VolumeNameRule.
func CheckVolumeName(name string) error {
	if !volumeName().MatchString(name) {
		return fmt.Errorf("volume name %q: use %s", name, VolumeNameRule)
	}
	return nil
}

// forbiddenMounts are the directories a volume may not be mounted at or under: Daytona's
// own list (apps/api/src/sandbox/utils/volume-mount-path-validation.util.ts, v0.190),
// kept on every backend so that a configuration valid on one is valid on the other; /tmp,
// which the local backend mounts per sandbox; the image's other system folders (/usr,
// /var, /lib32, /libx32), so that a volume never hides what the snapshot installed; and
// the sandbox's own plumbing (/run: the egress socket and helper; /.skills).
var forbiddenMounts = []string{"/proc", "/sys", "/dev", "/boot", "/etc", "/bin", "/sbin", "/lib", "/lib64",
	"/tmp", "/usr", "/var", "/lib32", "/libx32", "/run", "/.skills"}

// CheckMountPath reports a mount path that is not absolute, is "/" or the whole
// workspace, has relative or empty components, or lies in a system directory.
func CheckMountPath(p string) error {
	switch {
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("mount path %q must be absolute (for example /data)", p)
	case p == "/":
		return fmt.Errorf("mount path %q: a volume cannot be mounted at the root directory", p)
	case p == "/workspace":
		return fmt.Errorf("mount path %q: a volume cannot replace the whole workspace; mount it at /data or a folder of /workspace", p)
	case strings.HasSuffix(p, "/"):
		return fmt.Errorf("mount path %q must not end with '/'", p)
	}
	for _, part := range strings.Split(p[1:], "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("mount path %q cannot contain empty, '.' or '..' components", p)
		}
	}
	for _, f := range forbiddenMounts {
		if p == f || strings.HasPrefix(p, f+"/") {
			return fmt.Errorf("mount path %q is in system directory %s; use another path, for example /data", p, f)
		}
	}
	return nil
}

// CheckSubpath reports a subpath that could name anything but a folder inside the
// volume: absolute, with '..', '.' or empty components. "" (the whole volume) is fine.
func CheckSubpath(p string) error {
	if p == "" {
		return nil
	}
	if strings.HasPrefix(p, "/") {
		return fmt.Errorf("subpath %q must be relative to the volume (no leading '/')", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("subpath %q cannot contain empty, '.' or '..' components", p)
		}
	}
	return nil
}

// CheckVolumeMounts checks every mount of a sandbox: paths, subpaths, at most
// MaxVolumes and no mount path twice.
func CheckVolumeMounts(mounts []VolumeMount) error {
	if len(mounts) > MaxVolumes {
		return fmt.Errorf("%d volumes: at most %d may be mounted in a sandbox", len(mounts), MaxVolumes)
	}
	seen := map[string]bool{}
	for _, m := range mounts {
		if m.Volume == "" {
			return errors.New("a volume mount names no volume")
		}
		if err := CheckMountPath(m.MountPath); err != nil {
			return err
		}
		if err := CheckSubpath(m.Subpath); err != nil {
			return err
		}
		for other := range seen {
			if MountsOverlap(m.MountPath, other) {
				return fmt.Errorf("mount paths %q and %q overlap: one volume would hide the other's files", other, m.MountPath)
			}
		}
		seen[m.MountPath] = true
	}
	return nil
}

// MountsOverlap reports whether two mount paths are the same or one lies inside the
// other, so that the later mount would hide the earlier one's files.
func MountsOverlap(a, b string) bool {
	return a == b || strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}

// VolumeStore keeps a provider's volumes.
type VolumeStore interface {
	// Create creates the volume and waits until it can be mounted. A volume of that
	// name left by an earlier attempt is adopted.
	Create(ctx context.Context, spec VolumeSpec) (Volume, error)
	// Get reads a volume by its backend id; nil means it does not exist (or is being
	// deleted).
	Get(ctx context.Context, id string) (*Volume, error)
	// Delete deletes a volume and its files; a missing one is fine.
	Delete(ctx context.Context, id string) error
}

// VolumeSpec is a volume to create.
type VolumeSpec struct {
	Name string
	// SizeMB caps what sandboxes may write into it, where the backend can (the local
	// backend: an image of that size); 0 is no cap. Daytona's volumes have no size
	// (v0.190), so it is not sent there.
	SizeMB int64
}

// VolumeLimitReporter is implemented by runtimes that may mount a volume without its
// size enforced (the local runtime, for a volume kept as a plain directory):
// UnenforcedVolumes lists those of mounts, as LimitReporter does for Limits.
type VolumeLimitReporter interface {
	UnenforcedVolumes(mounts []VolumeMount) []UnenforcedLimit
}

// VolumeChecker is implemented by backends that can say, before a volume is created or
// resized, whether its size will be enforced: nothing when it will, a warning when it
// will not, an error when the provider requires limits (require_limits) and it will not.
type VolumeChecker interface {
	CheckVolume(ctx context.Context, p ProviderConfig, name string, sizeGB int64) []Problem
}

// VolumeResizer is implemented by volume stores that can grow a volume in place.
type VolumeResizer interface {
	// Grow makes volume id sizeMB large; a volume already that large or larger, or
	// one kept without a size, is left as it is.
	Grow(ctx context.Context, id string, sizeMB int64) error
}

// Volume is a volume as its backend reports it.
type Volume struct {
	// ID is the backend's id, which VolumeMount.Volume carries.
	ID string `json:"id"`
	// Name is the backend's name of it (Daytona's volume name).
	Name  string `json:"name"`
	State string `json:"state"`
}

// RegistryStore keeps a provider's private container registries.
type RegistryStore interface {
	// Create adds the registry; the backend pulls images whose host matches its URL
	// with its credentials.
	Create(ctx context.Context, r RegistrySpec) (RemoteRegistry, error)
	// Get reads a registry by its backend id; nil means it does not exist.
	Get(ctx context.Context, id string) (*RemoteRegistry, error)
	// Update changes the registry in place; the password is sent only when rotate is
	// set. A registry deleted outside trueforge is created again.
	Update(ctx context.Context, id string, r RegistrySpec, rotate bool) (RemoteRegistry, error)
	// Delete removes the registry; a missing one is fine.
	Delete(ctx context.Context, id string) error
}

// RegistrySpec is a registry as the control plane holds it: the password in memory only.
type RegistrySpec struct {
	Name     string
	URL      string
	Username string
	Password string
	Project  string
}

// RemoteRegistry is what a backend reports of a registry: never its password.
type RemoteRegistry struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	URL      string `json:"url"`
	Username string `json:"username"`
	Project  string `json:"project"`
}

// ErrUnsupported is wrapped by a backend that has no volumes or no registries.
var ErrUnsupported = errors.New("not supported by this backend")

// lazyRegexp returns a function that compiles expr the first time it is called, so that
// starting a program that links this package does not compile it (the local sandbox's
// init is such a program, started for each sandbox).
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
