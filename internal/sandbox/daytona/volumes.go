package daytona

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Volumes (S3-backed, mounted at a sandbox's CreateSandboxRequest.Volumes). Sources:
// the OpenAPI document (daytona/clients openapi-specs/api.json: CreateVolume, VolumeDto,
// VolumeState, SandboxVolume) and apps/api/src/sandbox/services/volume.service.ts
// (v0.190): a new volume is pending_create until the runner made it ready; a duplicate
// name is a 400 "Volume with name X already exists", a volume being deleted still
// holding its name (volume.service.ts:103-114); delete works from ready or error
// only (400 otherwise) and answers 409 while a sandbox uses the volume; a deleted volume
// reads as state deleted (pending_delete, deleting on the way).

// Volume states.
const (
	VolumeReady         = "ready"
	VolumeError         = "error"
	VolumeDeleted       = "deleted"
	VolumePendingDelete = "pending_delete"
	VolumeDeleting      = "deleting"
)

// Volume is VolumeDto.
type Volume struct {
	ID             string     `json:"id"`
	Name           string     `json:"name"`
	OrganizationID string     `json:"organizationId"`
	State          string     `json:"state"`
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
	LastUsedAt     *time.Time `json:"lastUsedAt,omitempty"`
	ErrorReason    *string    `json:"errorReason"`
}

// Gone reports a volume that is deleted or on its way there.
func (v *Volume) Gone() bool {
	return v.State == VolumeDeleted || v.State == VolumePendingDelete || v.State == VolumeDeleting
}

// SandboxVolume is one entry of CreateSandboxRequest.Volumes: VolumeID is an id or a
// name (the server resolves it to the id).
type SandboxVolume struct {
	VolumeID  string `json:"volumeId"`
	MountPath string `json:"mountPath"`
	Subpath   string `json:"subpath,omitempty"`
}

// CreateVolume sends POST /volumes {name} (needs write:volumes).
func (c *Client) CreateVolume(ctx context.Context, name string) (*Volume, error) {
	var v Volume
	r := &request{method: http.MethodPost, url: c.baseURL + "/volumes", body: map[string]string{"name": name}}
	if _, err := c.do(ctx, r, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// GetVolume sends GET /volumes/{volumeId} (needs read:volumes).
func (c *Client) GetVolume(ctx context.Context, id string) (*Volume, error) {
	return call[Volume](ctx, c, c.api(http.MethodGet, "/volumes/%s", esc(id)))
}

// GetVolumeByName sends GET /volumes/by-name/{name}; deleted volumes are not found.
func (c *Client) GetVolumeByName(ctx context.Context, name string) (*Volume, error) {
	return call[Volume](ctx, c, c.api(http.MethodGet, "/volumes/by-name/%s", esc(name)))
}

// DeleteVolume sends DELETE /volumes/{volumeId} (needs delete:volumes; 409 while in
// use).
func (c *Client) DeleteVolume(ctx context.Context, id string) error {
	return c.remove(ctx, "/volumes/%s", esc(id))
}

// IsVolumeNameTaken reports the 400 that POST /volumes answers for a name in use.
func IsVolumeNameTaken(err error) bool {
	e, ok := asAPI(err)
	return ok && e.Status == http.StatusBadRequest && strings.Contains(e.Message, "already exists")
}

// WaitVolumeDeleted polls GET /volumes/{id} until the volume is deleted (or gone), or in
// error (a failed delete: Daytona's volume manager sets error when the bucket cannot be
// removed), or ctx ends. Daytona works through pending deletes every 5 s
// (apps/api/src/sandbox/managers/volume.manager.ts:108, v0.190).
func (c *Client) WaitVolumeDeleted(ctx context.Context, id string) error {
	for {
		v, err := c.GetVolume(ctx, id)
		switch {
		case IsNotFound(err):
			return nil
		case err != nil:
			return err
		case v.State == VolumeDeleted:
			return nil
		case v.State == VolumeError:
			reason := ""
			if v.ErrorReason != nil {
				reason = *v.ErrorReason
			}
			return fmt.Errorf("daytona: deleting volume %s (%s) failed: %s", v.Name, v.ID, reason)
		}
		if err := sleep(ctx, c.poll); err != nil {
			return fmt.Errorf("daytona: volume %s still %s, want deleted: %w", v.Name, v.State, err)
		}
	}
}

// WaitVolume polls GET /volumes/{id} until the volume is ready or in error, or ctx ends.
func (c *Client) WaitVolume(ctx context.Context, id string) (*Volume, error) {
	for {
		v, err := c.GetVolume(ctx, id)
		if err != nil {
			return nil, err
		}
		switch {
		case v.State == VolumeReady:
			return v, nil
		case v.State == VolumeError:
			reason := ""
			if v.ErrorReason != nil {
				reason = *v.ErrorReason
			}
			return v, fmt.Errorf("daytona: volume %s (%s) is in error: %s", v.Name, v.ID, reason)
		case v.Gone():
			return v, fmt.Errorf("daytona: volume %s (%s) is %s", v.Name, v.ID, v.State)
		}
		if err := sleep(ctx, c.poll); err != nil {
			return v, fmt.Errorf("daytona: volume %s still %s: %w", v.Name, v.State, err)
		}
	}
}
