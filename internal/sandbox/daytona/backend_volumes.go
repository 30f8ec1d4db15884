package daytona

import (
	"context"
	"fmt"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// VolumeName is the Daytona volume of trueforge_volume name: "trueforge-<name>", so that
// trueforge's volumes stand apart from others of the organization.
func VolumeName(name string) string { return "trueforge-" + name }

// RegistryName is the Daytona docker registry of trueforge_registry name.
func RegistryName(name string) string { return "trueforge-" + name }

// Volumes returns the organization's volume store.
func (b *Backend) Volumes(_ context.Context, p sandbox.ProviderConfig) (sandbox.VolumeStore, error) {
	c, err := b.keyed(p)
	if err != nil {
		return nil, err
	}
	return volumeStore{c}, nil
}

// Registries returns the organization's docker registry store.
func (b *Backend) Registries(_ context.Context, p sandbox.ProviderConfig) (sandbox.RegistryStore, error) {
	c, err := b.keyed(p)
	if err != nil {
		return nil, err
	}
	return registryStore{c}, nil
}

// CheckVolume warns that a volume's size is not enforced on Daytona: a volume is an S3
// bucket, and v0.190's CreateVolumeDto has no size (apps/api/src/sandbox/dto/
// create-volume.dto.ts:10-16). It fills no disk of a host of ours.
func (b *Backend) CheckVolume(_ context.Context, _ sandbox.ProviderConfig, name string, sizeGB int64) []sandbox.Problem {
	if sizeGB <= 0 {
		return nil
	}
	return []sandbox.Problem{{Attribute: "size", Warning: true, Summary: "Volume Size Not Enforced By Daytona",
		Detail: fmt.Sprintf("Volume %q has size = %d GB, but Daytona volumes are S3-backed and have no size: its API takes only a name "+
			"(CreateVolume, Daytona v0.190). The size is recorded, not enforced; what sandboxes write there is bounded by your Daytona "+
			"organization's storage, not by this volume. Remove size to silence this warning.", name, sizeGB)}}
}

// volumeStore keeps trueforge volumes as Daytona volumes (sandbox.VolumeStore).
type volumeStore struct{ c *Client }

func toVolume(v *Volume) sandbox.Volume {
	return sandbox.Volume{ID: v.ID, Name: v.Name, State: v.State}
}

// Create creates the Daytona volume. Its size is not sent: CreateVolumeDto of v0.190
// has only a name (apps/api/src/sandbox/dto/create-volume.dto.ts:10-16) and a volume is
// an S3 bucket without a cap, so the provider warns that the size is not enforced.
func (s volumeStore) Create(ctx context.Context, spec sandbox.VolumeSpec) (sandbox.Volume, error) {
	remote := VolumeName(spec.Name)
	v, err := s.c.CreateVolume(ctx, remote)
	if IsVolumeNameTaken(err) {
		v, err = s.nameTaken(ctx, remote) // adopted, or waited for and created again
	}
	if err != nil {
		return sandbox.Volume{}, err
	}
	// Daytona mounts only ready volumes (the SDK waits for it too).
	if v, err = s.c.WaitVolume(ctx, v.ID); err != nil {
		return sandbox.Volume{}, err
	}
	return toVolume(v), nil
}

// volumeGoneWait bounds the wait for a volume of the same name to finish its delete
// before creating the new one.
const volumeGoneWait = 2 * time.Minute

// nameTaken handles a create refused because the name is taken. A volume of that name
// that is not being deleted was left by an earlier apply whose answer was lost: it is
// adopted. One being deleted (pending_delete or deleting: a trueforge_volume deleted and
// created again, as a replacement does) still holds the name until Daytona has deleted it
// (volume.service.ts:103-114, v0.190), so the create waits for that, bounded by
// volumeGoneWait, and is made again.
func (s volumeStore) nameTaken(ctx context.Context, name string) (*Volume, error) {
	v, err := s.c.GetVolumeByName(ctx, name)
	switch {
	case IsNotFound(err):
		// Deleted since the create: the name is free.
	case err != nil:
		return nil, err
	case !v.Gone():
		return v, nil
	default:
		wctx, cancel := context.WithTimeout(ctx, volumeGoneWait)
		defer cancel()
		if err := s.c.WaitVolumeDeleted(wctx, v.ID); err != nil {
			return nil, fmt.Errorf("volume name %s is still held by volume %s, which is being deleted; try again once Daytona has deleted it: %w", name, v.ID, err)
		}
	}
	return s.c.CreateVolume(ctx, name)
}

// storeGet is a store's Get of an object read from Daytona: a store answers nil, not an
// error, for one that does not exist, which Daytona answers with 404 or, for an object
// deleted in the background, with gone (nil for a kind that is deleted at once).
func storeGet[D, T any](d *D, err error, gone func(*D) bool, to func(*D) T) (*T, error) {
	if IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if gone != nil && gone(d) {
		return nil, nil
	}
	out := to(d)
	return &out, nil
}

func (s volumeStore) Get(ctx context.Context, id string) (*sandbox.Volume, error) {
	v, err := s.c.GetVolume(ctx, id)
	return storeGet(v, err, (*Volume).Gone, toVolume)
}

func (s volumeStore) Delete(ctx context.Context, id string) error {
	// A volume deleted (or being deleted) already answers 400 to another delete.
	if v, err := s.Get(ctx, id); err != nil || v == nil {
		return err
	}
	err := s.c.DeleteVolume(ctx, id)
	if err == nil || IsNotFound(err) {
		return nil
	}
	if IsConflict(err) {
		return fmt.Errorf("daytona: volume %s is still mounted by a sandbox (delete the sandboxes of the environments that used it, then try again; stopping them is not enough, and stopped and archived sandboxes count too): %w", id, err)
	}
	return err
}

// registryStore keeps trueforge registries as Daytona docker registries of the
// organization (sandbox.RegistryStore).
type registryStore struct{ c *Client }

func toRegistry(d *DockerRegistry) sandbox.RemoteRegistry {
	return sandbox.RemoteRegistry{ID: d.ID, Name: d.Name, URL: d.URL, Username: d.Username, Project: d.Project}
}

// find returns the organization registry named name, nil when there is none: a create
// whose answer was lost left it.
func (s registryStore) find(ctx context.Context, name string) (*DockerRegistry, error) {
	all, err := s.c.ListDockerRegistries(ctx)
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].Name == name && (all[i].RegistryType == "" || all[i].RegistryType == "organization") {
			return &all[i], nil
		}
	}
	return nil, nil
}

func (s registryStore) Create(ctx context.Context, r sandbox.RegistrySpec) (sandbox.RemoteRegistry, error) {
	name := RegistryName(r.Name)
	if existing, err := s.find(ctx, name); err != nil {
		return sandbox.RemoteRegistry{}, err
	} else if existing != nil {
		return s.Update(ctx, existing.ID, r, true)
	}
	d, err := s.c.CreateDockerRegistry(ctx, CreateDockerRegistryRequest{
		Name: name, URL: r.URL, Username: r.Username, Password: r.Password, Project: r.Project})
	if err != nil {
		return sandbox.RemoteRegistry{}, err
	}
	return toRegistry(d), nil
}

func (s registryStore) Get(ctx context.Context, id string) (*sandbox.RemoteRegistry, error) {
	d, err := s.c.GetDockerRegistry(ctx, id)
	return storeGet(d, err, nil, toRegistry)
}

func (s registryStore) Update(ctx context.Context, id string, r sandbox.RegistrySpec, rotate bool) (sandbox.RemoteRegistry, error) {
	req := UpdateDockerRegistryRequest{Name: RegistryName(r.Name), URL: r.URL, Username: r.Username, Project: r.Project}
	if rotate {
		req.Password = r.Password
	}
	d, err := s.c.UpdateDockerRegistry(ctx, id, req)
	if IsNotFound(err) {
		// Deleted outside trueforge: made again, with the configured password.
		return s.Create(ctx, r)
	}
	if err != nil {
		return sandbox.RemoteRegistry{}, err
	}
	return toRegistry(d), nil
}

func (s registryStore) Delete(ctx context.Context, id string) error {
	if err := s.c.DeleteDockerRegistry(ctx, id); err != nil && !IsNotFound(err) {
		return err
	}
	return nil
}

// sandboxVolumes are a create request's volume mounts as CreateSandbox takes them. Daytona
// mounts a volume at the literal mountPath (apps/api/src/sandbox/services/sandbox.service.ts:3334-3366,
// v0.190), so a path in the contract's /workspace goes through mapPath (Runtime.fromSandbox,
// as for the cwd and the file tools): /workspace/data mounts at <WorkDir>/data, where the
// agent's file tools and relative paths reach it.
func sandboxVolumes(mounts []sandbox.VolumeMount, mapPath func(string) string) []SandboxVolume {
	var out []SandboxVolume
	for _, m := range mounts {
		out = append(out, SandboxVolume{VolumeID: m.Volume, MountPath: mapPath(m.MountPath), Subpath: m.Subpath})
	}
	return out
}
