package daytona

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// ErrVolumeNotFound is a sandbox create that Daytona refused because a volume it mounts
// does not exist. It is not sandbox.ErrNotFound: that means the sandbox is gone, and a
// caller would take the create's 404 for a lost sandbox and try again.
var ErrVolumeNotFound = errors.New("volume not found")

// volumeNotFoundRE is getVolumesByIdOrName's 404 for a reference to no volume (v0.190
// apps/api/src/sandbox/services/volume.service.ts:268-270).
var volumeNotFoundRE = regexp.MustCompile(`^Volume '(.*)' not found$`)

// createNotFound turns a 404 from POST /sandbox, which never means that the sandbox is
// missing, into an error that errors.Is does not read as sandbox.ErrNotFound: a missing
// volume is ErrVolumeNotFound naming the volume and its mount path, anything else keeps
// Daytona's message. Other errors are returned as they are.
func createNotFound(err error, mounts []sandbox.VolumeMount) error {
	e, ok := asAPI(err)
	if !ok || !IsNotFound(err) {
		return err
	}
	if m := volumeNotFoundRE.FindStringSubmatch(e.Message); m != nil {
		where := ""
		for _, v := range mounts {
			if v.Volume == m[1] {
				where = " (mounted at " + v.MountPath + ")"
				break
			}
		}
		return fmt.Errorf("%w: Daytona has no volume %s%s: it was deleted outside trueforge; apply the trueforge_volume again to recreate it, or remove it from the environment",
			ErrVolumeNotFound, m[1], where)
	}
	return fmt.Errorf("daytona: %s %s: %d %s (the create was refused; the sandbox was not made)", e.Method, e.URL, e.Status, e.Message)
}
