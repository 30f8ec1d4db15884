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

// volumeStore is the local backend's sandbox.VolumeStore.
type volumeStore struct{ dir string }

// Volumes returns the control plane's volume store.
func (b *Backend) Volumes(_ context.Context, p sandbox.ProviderConfig) (sandbox.VolumeStore, error) {
	root, err := b.snapshotRoot(p.DataDir)
	if err != nil {
		return nil, err
	}
	return volumeStore{dir: volumesDir(root)}, nil
}

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

func (s volumeStore) Create(_ context.Context, name string) (sandbox.Volume, error) {
	p, err := s.path(name)
	if err != nil {
		return sandbox.Volume{}, err
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
	if err := removeAll(p); err != nil {
		return fmt.Errorf("local: deleting volume %s: %w", id, err)
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

// resolveVolumes checks a create request's volume mounts and makes each subpath that is
// missing (a folder of its volume; never through a symbolic link out of it).
func (r *Runtime) resolveVolumes(mounts []sandbox.VolumeMount) ([]volumeBind, error) {
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
