//go:build linux

package daytonatest

import (
	"context"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/local"
)

// createBox creates a sandbox's box with its volumes mounted: on local (bubblewrap)
// sandboxes each volume is a local volume directory named by the Daytona volume's id,
// under the release's builder root, so that every sandbox mounting the volume shares its
// files, as Daytona's runners share a volume's S3 prefix. Host-process sandboxes confine
// nothing and mount nothing: there volumes are validated and recorded only.
func (s *Server) createBox(bx box, id string, blockNetwork bool, vols []sandboxVolume) error {
	lb, ok := bx.(*localBox)
	if !ok || len(vols) == 0 {
		return bx.create(id, blockNetwork)
	}
	ctx := context.Background()
	store, err := (&local.Backend{SharedDir: lb.b.Root()}).Volumes(ctx, sandbox.ProviderConfig{})
	if err != nil {
		return err
	}
	req := sandbox.CreateRequest{ID: id, SnapshotID: lb.rel, BlockNetwork: blockNetwork}
	for _, v := range vols {
		if _, err := store.Create(ctx, sandbox.VolumeSpec{Name: v.VolumeID}); err != nil {
			return err
		}
		req.Volumes = append(req.Volumes, sandbox.VolumeMount{Volume: v.VolumeID, MountPath: v.MountPath, Subpath: v.Subpath})
	}
	return lb.rt.Create(ctx, req)
}
