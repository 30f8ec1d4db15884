package daytona

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// DefaultReleaseImage is the image the release snapshot is made from (a tagged Daytona
// sandbox image; `:latest` is rejected by the API).
const DefaultReleaseImage = "daytonaio/sandbox:0.4.3"

// logTailBytes bounds BuildState.LogTail.
const logTailBytes = 4 << 10

// Builder is a sandbox.SnapshotBuilder on Daytona snapshots. Snapshot ids are Daytona
// snapshot names (the API reads by name; delete and activate resolve the UUID first).
//
// Mapping of a build request:
//   - the snapshot name is req.ID;
//   - the Dockerfile is the spec's own (`FROM platform` read as ReleaseImage, its build
//     context uploaded first), else Dockerfile(base, user, req.Spec.BuildScript), where base is
//     req.Spec.Image when it names a real image, else ReleaseImage (the platform image: a
//     Daytona snapshot cannot be used in FROM, so req.Base only has to exist and is not
//     referenced) and user is PlatformImageUser for ReleaseImage, else unknown (""); the
//     entrypoint is appended to it (snapshotRequest, buildinfo.go);
//   - cpu/memory/disk/gpu come from the spec when > 0 (they become every sandbox's
//     resources), gpu_type as the one preferred GPU type;
//   - req.BlockNetwork is not supported by Daytona builds and is ignored (builds use
//     Daytona's build network).
type Builder struct {
	C *Client
	// ReleaseImage is the platform image (default DefaultReleaseImage).
	ReleaseImage string
}

var _ sandbox.SnapshotBuilder = (*Builder)(nil)

// NewBuilder returns a Builder on c with the default release image.
func NewBuilder(c *Client) *Builder { return &Builder{C: c, ReleaseImage: DefaultReleaseImage} }

// ReleaseName is the release snapshot's name in the organization's default region:
// "trueforge-release-<hash of the image>" (releaseName).
func (b *Builder) ReleaseName() string { return b.releaseName(RegionRef{}) }

// releaseName is the release snapshot's name in region: the image's hash, with the
// region's id in it for any region but the default. Snapshot names are unique in an
// organization and a snapshot lives in the regions it was made in (v0.190
// apps/api/src/sandbox/entities/snapshot.entity.ts:26; no API adds a region to one), so
// two sandbox providers with different targets on one organization each need a release
// of their own, not one that each replaces by turns (issue 24 M3).
func (b *Builder) releaseName(region RegionRef) string {
	in := "trueforge-release/v1\n" + b.ReleaseImage
	if region.ID != "" {
		in += "\nregion " + region.ID
	}
	sum := sha256.Sum256([]byte(in))
	return "trueforge-release-" + hex.EncodeToString(sum[:])[:16]
}

// PrepareRelease makes sure the release snapshot exists and is active, waiting for it (bounded
// by ctx). It reuses an active one, activates an inactive one and replaces a failed one.
func (b *Builder) PrepareRelease(ctx context.Context) (string, error) {
	region, err := b.snapshotRegion(ctx, "")
	if err != nil {
		return "", fmt.Errorf("daytona: prepare release: %w", err)
	}
	name := b.releaseName(region)
	req := CreateSnapshotRequest{Name: name, ImageName: b.ReleaseImage, RegionID: region.ID}
	if err := b.ensure(ctx, req, region); err != nil {
		return "", fmt.Errorf("daytona: prepare release %s: %w", name, err)
	}
	s, err := b.C.WaitSnapshot(ctx, name)
	if err != nil {
		return "", fmt.Errorf("daytona: prepare release %s: %w", name, err)
	}
	if s.State != SnapshotActive {
		return "", fmt.Errorf("daytona: prepare release %s: snapshot is %s: %s", name, s.State, s.ErrorReason)
	}
	return name, nil
}

// StartBuild creates the snapshot named req.ID and returns once Daytona has accepted it.
// Daytona builds on its runners, so the build outlives this process.
func (b *Builder) StartBuild(ctx context.Context, req sandbox.BuildRequest) error {
	if req.ID == "" {
		return errors.New("daytona: start build: no snapshot id")
	}
	cr, err := b.snapshotRequest(ctx, req) // buildinfo.go
	if err != nil {
		return fmt.Errorf("daytona: start build of %s: %w", req.ID, err)
	}
	region, err := b.snapshotRegion(ctx, req.Spec.Region)
	if err != nil {
		return fmt.Errorf("daytona: start build of %s: %w", req.ID, err)
	}
	cr.RegionID = region.ID
	if err := b.ensure(ctx, cr, region); err != nil {
		return fmt.Errorf("daytona: start build of %s: %w", req.ID, err)
	}
	return nil
}

// ensure gets the snapshot by name and: leaves it alone if active or in progress, activates
// it if inactive, deletes and recreates it if failed or built without the workspace
// (outdatedLayout), creates it if missing. One that lives in another region is refused
// (ErrOtherRegion), never replaced: names are unique in an organization and Daytona has no
// call that adds a region to a snapshot, so it is another sandbox provider's (another
// target on the same organization), whose sandboxes would lose it.
func (b *Builder) ensure(ctx context.Context, req CreateSnapshotRequest, region RegionRef) error {
	s, err := b.C.GetSnapshot(ctx, req.Name)
	switch {
	case IsNotFound(err):
		return b.create(ctx, req)
	case err != nil:
		return err
	}
	if !inRegion(s, region) && s.State != SnapshotRemoving {
		return fmt.Errorf("%w: snapshot %s exists in region(s) %s of this Daytona organization, not in %s. Daytona names snapshots per organization and cannot add a region to one, so an environment with the same build inputs cannot have its own snapshot here. Set region on the environment (a region is a build input: the snapshot gets a name of its own), or, if this sandbox provider's target was changed and the old snapshot is no longer used, delete it in Daytona and apply again",
			ErrOtherRegion, req.Name, strings.Join(s.RegionIDs, ", "), region)
	}
	switch {
	case s.State == SnapshotActive && outdatedLayout(s):
		if err := b.C.DeleteSnapshot(ctx, s.ID); err != nil && !IsNotFound(err) {
			return fmt.Errorf("replacing snapshot %s, built without the workspace: %w", req.Name, err)
		}
		if err := b.waitGone(ctx, req.Name); err != nil {
			return err
		}
		return b.create(ctx, req)
	}
	switch s.State {
	case SnapshotInactive:
		return b.activate(ctx, s) // snapshotstates.go
	case SnapshotRemoving:
		if err := b.waitGone(ctx, req.Name); err != nil {
			return err
		}
		return b.create(ctx, req)
	case SnapshotError, SnapshotBuildFailed:
		if err := b.C.DeleteSnapshot(ctx, s.ID); err != nil && !IsNotFound(err) {
			return err
		}
		if err := b.waitGone(ctx, req.Name); err != nil {
			return err
		}
		return b.create(ctx, req)
	default:
		// Active, or on its way: pending, pulling, building, snapshotting (v0.205), or a
		// state newer than this client. None is a reason to build again.
		return nil
	}
}

// create posts the snapshot; a 409 means someone (or a lost earlier answer) created it.
func (b *Builder) create(ctx context.Context, req CreateSnapshotRequest) error {
	_, err := b.C.CreateSnapshot(ctx, req)
	if IsConflict(err) {
		if _, gerr := b.C.GetSnapshot(ctx, req.Name); gerr == nil {
			return nil
		}
	}
	return err
}

// waitGone polls until a removed snapshot's name is free (Daytona removes rows by cron).
func (b *Builder) waitGone(ctx context.Context, name string) error {
	for {
		_, err := b.C.GetSnapshot(ctx, name)
		if IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := sleep(ctx, b.C.poll); err != nil {
			return fmt.Errorf("snapshot %s is still being removed: %w", name, err)
		}
	}
}

func ignoreAlreadyActive(err error) error {
	if e, ok := asAPI(err); ok && e.Status == 400 && strings.Contains(strings.ToLower(e.Message), "already active") {
		return nil
	}
	return err
}

// InactiveReason is the Failed reason of a snapshot Daytona deactivated.
const InactiveReason = "snapshot is inactive (Daytona deactivates snapshots unused for 14 days); the next apply re-activates it without rebuilding"

// ReusesSnapshots tells the build coordinator that StartBuild keeps what Daytona holds
// under the snapshot name when it is usable (reuse active, re-activate inactive) and
// replaces it only when failed, so the coordinator must not delete it first.
func (b *Builder) ReusesSnapshots() bool { return true }

// BuildState maps the snapshot's state: pending/building/pulling → Building, active → Ready,
// build_failed/error → Failed (errorReason and the build log's tail), inactive → Failed
// with InactiveReason (StartBuild re-activates it), removing or 404 → sandbox.ErrNotFound.
// It only reads.
func (b *Builder) BuildState(ctx context.Context, id string) (sandbox.BuildState, error) {
	s, err := b.C.GetSnapshot(ctx, id)
	if err != nil {
		return sandbox.BuildState{}, fmt.Errorf("daytona: build state of %s: %w", id, err)
	}
	switch s.State {
	case SnapshotActive:
		if outdatedLayout(s) {
			// As for an inactive one: the next plan proposes a build, which replaces it.
			return sandbox.BuildState{Status: sandbox.StatusFailed, Reason: OutdatedReason}, nil
		}
		return sandbox.BuildState{Status: sandbox.StatusReady}, nil
	case SnapshotBuildFailed, SnapshotError:
		st := sandbox.BuildState{Status: sandbox.StatusFailed, Reason: firstLine(s.ErrorReason)}
		if st.Reason == "" {
			st.Reason = "snapshot " + s.State
		}
		st.LogTail = b.failureLog(ctx, s) // snapshotstates.go
		return st, nil
	case SnapshotInactive:
		// Reading never writes (a plan's refresh must not change anything): an inactive
		// snapshot reads as Failed, so the next plan proposes a new build, and StartBuild
		// then re-activates it instead of building again.
		return sandbox.BuildState{Status: sandbox.StatusFailed, Reason: InactiveReason}, nil
	case SnapshotRemoving:
		return sandbox.BuildState{}, fmt.Errorf("daytona: snapshot %s is being removed: %w", id, sandbox.ErrNotFound)
	default:
		return sandbox.BuildState{Status: sandbox.StatusBuilding}, nil
	}
}

// ErrOtherRegion: a snapshot of the name exists in another region of the organization.
var ErrOtherRegion = errors.New("snapshot exists in another region")

// OutdatedReason is BuildState's reason for an active snapshot built before builds made
// the workspace (WithWorkspace): its sandboxes' user may be unable to create /workspace.
const OutdatedReason = "snapshot was built without the /workspace directory (by trueforge before builds ended with WORKDIR /workspace); the next apply rebuilds it"

// outdatedLayout reports whether s is a build of an older trueforge, whose Dockerfile did
// not make the workspace. The API returns a snapshot's build info with it (v0.190
// apps/api/src/sandbox/entities/snapshot.entity.ts:115-120, eager; dto/snapshot.dto.ts:
// 133-139). Snapshots without build info (the release, made from an image) are not
// environment builds and are left alone.
func outdatedLayout(s *Snapshot) bool {
	return s.BuildInfo != nil && !hasWorkspace(s.BuildInfo.DockerfileContent)
}

// DeleteSnapshot deletes the snapshot named id; a missing one is not an error.
func (b *Builder) DeleteSnapshot(ctx context.Context, id string) error {
	s, err := b.C.GetSnapshot(ctx, id)
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("daytona: delete snapshot %s: %w", id, err)
	}
	if s.State == SnapshotRemoving {
		return nil
	}
	if err := b.C.DeleteSnapshot(ctx, s.ID); err != nil && !IsNotFound(err) {
		return fmt.Errorf("daytona: delete snapshot %s: %w", id, err)
	}
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
