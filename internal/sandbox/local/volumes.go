package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Volumes of the local backend are directories under the builder's root (so, with a
// shared snapshot directory, on every machine of the control plane alike):
// <root>/volumes/<name>. A volume's backend id is its name. The directory belongs to the
// user running the runtime; a sandbox mounts it through an idmapped mount that shows
// that user's files as the sandbox user's (mapUser), so that every sandbox, whatever its
// id slot, reads and writes the same files as its own, and what they write is stored as
// the runtime's user. Unprivileged there is no slot: the runtime's user is the sandbox
// user already.

// volumesDir is where the volumes of a builder rooted at root live.
func volumesDir(root string) string { return filepath.Join(root, "volumes") }

// volumeStore is the local backend's sandbox.VolumeStore. A volume with a size is kept
// on an image of that size where this process can mount one (volume_image.go); shared
// says the volumes are on a shared snapshot directory (never an image there), require
// refuses a size that would not be enforced (the provider's require_limits).
type volumeStore struct {
	dir     string
	shared  bool
	require bool
}

// Volumes returns the control plane's volume store.
func (b *Backend) Volumes(_ context.Context, p sandbox.ProviderConfig) (sandbox.VolumeStore, error) {
	root, err := b.snapshotRoot(p.DataDir)
	if err != nil {
		return nil, err
	}
	return volumeStore{dir: volumesDir(root), shared: b.SharedDir != "", require: RequireLimitsFor(p.RequireLimits)}, nil
}

// CheckVolume says whether a volume of sizeGB will be kept to its size on this host,
// for the user running the check (sandbox.VolumeChecker): a warning when it will not
// (an unprivileged user, a shared snapshot directory), an error when the provider
// requires limits (RequireLimitsFor), as CheckEnvironment says for sandbox limits.
func (b *Backend) CheckVolume(_ context.Context, p sandbox.ProviderConfig, name string, sizeGB int64) []sandbox.Problem {
	probe := b.VolumeProbe
	if probe == nil {
		probe = volumeSizeUnenforced
	}
	why := probe(b.SharedDir != "")
	if why == "" || sizeGB <= 0 {
		return nil
	}
	what := fmt.Sprintf("Volume %q (size = %d GB) cannot be kept to its size on this host by the user running Terraform (uid %d): %s.\n\n",
		name, sizeGB, os.Geteuid(), why)
	if RequireLimitsFor(p.RequireLimits) {
		return []sandbox.Problem{{Attribute: "size", Summary: "Volume Size Cannot Be Enforced", Detail: what + fmt.Sprintf(
			"Sandbox provider %q requires limits (require_limits, or root by default), so the volume is refused. Run Terraform and "+
				"trueforge-harness as root with e2fsprogs installed and the volumes outside a shared snapshot directory, or set "+
				"require_limits = false on the sandbox provider to keep volumes without a cap.", p.Name)}}
	}
	return []sandbox.Problem{{Attribute: "size", Warning: true, Summary: "Volume Size Not Enforced On This Host", Detail: what + fmt.Sprintf(
		"The volume is still created, as a plain directory on the host filesystem: a sandbox may fill it, and the filesystem under it. "+
			"The harness records this on each sandbox_provisioned event that mounts it. To enforce the size, create the volume as root "+
			"(e2fsprogs installed, no shared snapshot directory); to refuse such volumes instead, set require_limits = true on sandbox provider %q.", p.Name)}}
}

// ErrVolumeSizeUnenforced is wrapped when a volume with a size is refused because this
// host cannot keep it to that size and limits are required.
var ErrVolumeSizeUnenforced = errors.New("volume size cannot be enforced")

// ErrRegistries is why the local backend has no registries.
var ErrRegistries = fmt.Errorf("the local backend runs only the platform image; remote images and registries need a daytona provider: %w", sandbox.ErrUnsupported)

// Registries: none (ErrRegistries).
func (b *Backend) Registries(context.Context, sandbox.ProviderConfig) (sandbox.RegistryStore, error) {
	return nil, ErrRegistries
}

func (s volumeStore) path(id string) (string, error) {
	if err := sandbox.CheckVolumeName(id); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, id), nil
}

func (s volumeStore) Create(ctx context.Context, spec sandbox.VolumeSpec) (sandbox.Volume, error) {
	name := spec.Name
	p, err := s.path(name)
	if err != nil {
		return sandbox.Volume{}, err
	}
	why := ""
	if spec.SizeMB > 0 {
		if why = volumeSizeUnenforced(s.shared); why != "" && s.require {
			return sandbox.Volume{}, fmt.Errorf("local: volume %s: its size (%d MiB) cannot be enforced on this host, and limits are required "+
				"(the sandbox provider's require_limits): %s. Create it as root with e2fsprogs installed and the volumes outside a shared "+
				"snapshot directory, or set require_limits = false on the sandbox provider to keep it without a cap: %w",
				name, spec.SizeMB, why, ErrVolumeSizeUnenforced)
		}
	}
	// What a sandbox writes into a volume is stored as the runtime's user: root, when
	// the runtime runs as root. A sandbox may so leave a set-user-ID program owned by
	// root there (it owns the file in its own view, and may set the bit), so no other
	// user of the host may reach the volumes at all: the directory is 0700, whatever
	// mode an earlier release left it with, and only the runtime's user traverses it.
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return sandbox.Volume{}, fmt.Errorf("local: volumes directory: %w", err)
	}
	if err := os.Chmod(s.dir, 0o700); err != nil {
		return sandbox.Volume{}, fmt.Errorf("local: volumes directory: %w", err)
	}
	// 0755: the sandbox user owns it inside (see above); the parent keeps others out.
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return sandbox.Volume{}, fmt.Errorf("local: creating volume %s: %w", name, err)
	}
	if spec.SizeMB > 0 && why == "" {
		if err := makeVolumeImage(ctx, p, spec.SizeMB); err != nil {
			return sandbox.Volume{}, fmt.Errorf("local: volume %s, an image of %d MiB: %w", name, spec.SizeMB, err)
		}
	}
	return sandbox.Volume{ID: name, Name: name, State: "ready"}, nil
}

func (s volumeStore) Get(_ context.Context, id string) (*sandbox.Volume, error) {
	p, err := s.path(id)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("local: volume %s: %s is not a directory", id, p)
	}
	return &sandbox.Volume{ID: id, Name: id, State: "ready"}, nil
}

func (s volumeStore) Delete(_ context.Context, id string) error {
	p, err := s.path(id)
	if err != nil {
		return err
	}
	if err := unmountVolume(p); err != nil {
		return fmt.Errorf("local: deleting volume %s: %w", id, err)
	}
	if err := removeAll(p); err != nil {
		return fmt.Errorf("local: deleting volume %s: %w", id, err)
	}
	for _, f := range []string{volumeImage(p), volumeLock(p)} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("local: deleting volume %s: %w", id, err)
		}
	}
	return nil
}

// volumeBind is a volume mount of a sandbox as its record keeps it: the volume's
// directory and the subpath inside it, both resolved again by the setup step, which
// refuses symbolic links (a sandbox that mounts the whole volume can replace the
// subpath with one).
type volumeBind struct {
	Dir       string `json:"dir"`
	Subpath   string `json:"subpath,omitempty"`
	MountPath string `json:"mount_path"`
}

// resolveVolumes checks a create request's volume mounts, mounts their images where
// missing, and makes each subpath that is missing (a folder of its volume; never
// through a symbolic link out of it). A volume kept as a plain directory (one of an
// earlier release, or made where its size could not be enforced, which require_limits
// refused at its creation) is mounted all the same: refusing it would stop every
// sandbox of its environments at the upgrade, while UnenforcedVolumes reports it on
// each sandbox's event.
func (r *Runtime) resolveVolumes(ctx context.Context, mounts []sandbox.VolumeMount) ([]volumeBind, error) {
	if len(mounts) == 0 {
		return nil, nil
	}
	if err := sandbox.CheckVolumeMounts(mounts); err != nil {
		return nil, err
	}
	vs := volumeStore{dir: volumesDir(r.b.root)}
	var out []volumeBind
	for _, m := range mounts {
		dir, err := vs.path(m.Volume)
		if err != nil {
			return nil, err
		}
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("volume %s does not exist (create it with trueforge_volume)", m.Volume)
		}
		// Before the subpath is made: it belongs on the image, not under it.
		if err := ensureVolumeMounted(ctx, dir); err != nil {
			return nil, err
		}
		if m.Subpath != "" {
			root, err := os.OpenRoot(dir)
			if err != nil {
				return nil, err
			}
			err = root.MkdirAll(m.Subpath, 0o755)
			root.Close()
			if err != nil {
				return nil, fmt.Errorf("volume %s, subpath %q: %w", m.Volume, m.Subpath, err)
			}
		}
		out = append(out, volumeBind{Dir: dir, Subpath: m.Subpath, MountPath: m.MountPath})
	}
	return out, nil
}

// volumeStageName is the staging name of a sandbox's i-th volume.
func volumeStageName(i int) string { return fmt.Sprintf("vol%d", i) }

// volumeBinds are the setup step's binds of a sandbox's volumes, idmapped to the
// sandbox user when the sandbox has an id slot.
func volumeBinds(vols []volumeBind, mapped func(string) string) []stageBind {
	var out []stageBind
	for i, v := range vols {
		out = append(out, stageBind{Src: v.Dir, Beneath: v.Subpath, Dst: volumeStageName(i), Map: mapped(mapUser), Volume: true})
	}
	return out
}

// volumeArgs are bwrap's binds of a sandbox's volumes, after /workspace so that a volume
// may be mounted inside it.
func volumeArgs(vols []volumeBind) []string {
	var args []string
	for i, v := range vols {
		args = append(args, "--bind", stagePath(volumeStageName(i)), v.MountPath)
	}
	return args
}
