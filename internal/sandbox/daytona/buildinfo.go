package daytona

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// snapshotRequest maps a build request onto the body of POST /snapshots. Every build is a
// declarative one (buildInfo): the environment's own Dockerfile when it has one, else the
// Dockerfile generated from its image and build script (Dockerfile; the script runs as
// root and the platform image's sandboxes as PlatformImageUser). Then:
//   - cpu, memory, disk and gpu come from the spec when > 0, and gpu_type as the one
//     preferred GPU type (Daytona takes an ordered preference list);
//   - the entrypoint becomes the Dockerfile's last ENTRYPOINT instruction: Daytona refuses
//     `entrypoint` next to `buildInfo` and takes a build's entrypoint from its Dockerfile
//     (v0.190 apps/api/src/sandbox/controllers/snapshot.controller.ts createSnapshot, and
//     services/snapshot.service.ts getEntrypointFromDockerfile);
//   - `FROM platform` in a Dockerfile names the release image, as the platform image does;
//   - the build context is uploaded first (uploadContext) and named in contextHashes;
//   - the Dockerfile ends by making /workspace, the sandboxes' work directory, owned by
//     the image's user (withWorkspace).
//
// The region (regionId) is StartBuild's, as resolved for the spec's region or target.
func (b *Builder) snapshotRequest(ctx context.Context, req sandbox.BuildRequest) (CreateSnapshotRequest, error) {
	spec := req.Spec
	cr := CreateSnapshotRequest{
		Name:   req.ID,
		CPU:    max(spec.CPU, 0),
		Memory: max(spec.MemoryGB, 0),
		Disk:   max(spec.DiskGB, 0),
		GPU:    max(spec.GPU, 0),
	}
	if spec.GPUType != "" {
		cr.GPUType = []string{spec.GPUType}
	}
	var dockerfile, user string
	var hashes []string
	if spec.Dockerfile != "" {
		dockerfile, user = platformBase(spec.Dockerfile, b.ReleaseImage)
		h, err := b.uploadContext(ctx, req)
		if err != nil {
			return CreateSnapshotRequest{}, err
		}
		hashes = h
	} else {
		// The script runs as root; the user to switch back to is known for the
		// platform image only (Dockerfile).
		base := spec.Image
		if base == "" || base == sandbox.PlatformImage {
			base, user = b.ReleaseImage, PlatformImageUser
		}
		dockerfile = Dockerfile(base, user, spec.BuildScript)
	}
	cr.BuildInfo = &BuildInfo{DockerfileContent: withEntrypoint(withWorkspace(dockerfile, user), spec.Entrypoint), ContextHashes: hashes}
	return cr, nil
}

// fromPlatformRE matches a `FROM platform` line (with an optional stage name).
var fromPlatformRE = regexp.MustCompile(`(?im)^(\s*FROM\s+)platform(\s+AS\s+\S+)?\s*$`)

// platformBase replaces the base image "platform" with image, so that a Dockerfile that
// builds on the platform image means the same on every backend: as on the local backend,
// its instructions run as root, so each `FROM platform` is followed by `USER root`, and a
// final stage on the platform image that sets no USER of its own ends with `USER
// PlatformImageUser`, so that its sandboxes run as the platform image's user as those of
// image + build_script do (Dockerfile). A stage's own USER lines are kept as written.
// It also returns the user the image runs as when the Dockerfile says it: the final
// stage's last USER, or PlatformImageUser for a final stage on the platform image that
// sets none ("" when neither: the base image's user is not known here).
func platformBase(dockerfile, image string) (string, string) {
	finalOnPlatform, userSet, user := false, false, ""
	for l := range strings.SplitSeq(dockerfile, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			finalOnPlatform, userSet, user = fromPlatformRE.MatchString(l), false, ""
		case "USER":
			userSet = true
			if len(f) > 1 {
				user, _, _ = strings.Cut(f[1], ":")
			}
		}
	}
	out := fromPlatformRE.ReplaceAllString(dockerfile, "${1}"+image+"${2}\nUSER root")
	if finalOnPlatform && !userSet {
		if !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		out += "USER " + PlatformImageUser + "\n"
		user = PlatformImageUser
	}
	return out, user
}

// withEntrypoint appends an exec-form ENTRYPOINT for entrypoint (none when it is empty).
// Daytona takes a build's entrypoint from its Dockerfile's text: the last ENTRYPOINT line,
// else `sleep infinity` (v0.190 apps/api/src/sandbox/services/snapshot.service.ts:883-902),
// which the runner hands to the sandbox's daemon (apps/runner/pkg/docker/
// container_configs.go:154-163). An ENTRYPOINT the base image sets, not written in the
// text, therefore never runs on Daytona (issue 24 L13).
func withEntrypoint(dockerfile string, entrypoint []string) string {
	var args []string
	for _, a := range entrypoint {
		if strings.TrimSpace(a) != "" { // Daytona drops blank arguments too
			args = append(args, a)
		}
	}
	if len(args) == 0 {
		return dockerfile
	}
	j, _ := json.Marshal(args)
	if !strings.HasSuffix(dockerfile, "\n") {
		dockerfile += "\n"
	}
	return dockerfile + "ENTRYPOINT " + string(j) + "\n"
}

// uploadContext uploads the build context folder of req as Daytona's SDKs do (daytona/
// clients sdk-go pkg/daytona/snapshot.go processImageContext and object_storage.go
// Upload): push access from the API, then one tarball at ContextKey(organization, hash)
// unless an object is already stored there. The hash is the spec's content hash
// (sandbox.ReadBuildContext), so identical contexts are uploaded once per organization;
// the folder is read again and refused when its files no longer hash to it (a file
// changed since the plan). It returns the contextHashes of the build (none without a
// context).
func (b *Builder) uploadContext(ctx context.Context, req sandbox.BuildRequest) ([]string, error) {
	want := req.Spec.ContextHash
	if want == "" {
		return nil, nil
	}
	if req.ContextDir == "" {
		return nil, errors.New("daytona: the build context's folder is not on this machine: apply from the configuration's folder so that build_context can be read")
	}
	bc, err := sandbox.ReadBuildContext(req.ContextDir)
	if err != nil {
		return nil, fmt.Errorf("daytona: %w", err)
	}
	if bc.Hash != want {
		return nil, fmt.Errorf("daytona: the build context %q changed since the plan (its files hash to %.12s, the plan to %.12s): plan and apply again", req.ContextDir, bc.Hash, want)
	}
	want = tarHash(bc)
	access, err := b.C.PushAccess(ctx)
	if err != nil {
		return nil, fmt.Errorf("daytona: object storage access for the build context: %w", err)
	}
	key := ContextKey(access.OrganizationID, want)
	ok, err := b.C.objectExists(ctx, access, key)
	if err != nil {
		return nil, err
	}
	if !ok {
		tarball, err := contextTar(req.ContextDir, bc)
		if err != nil {
			return nil, err
		}
		if err := b.C.putObject(ctx, access, key, tarball); err != nil {
			return nil, err
		}
	}
	return []string{want}, nil
}

// contextDockerfile is the name Daytona's runner builds from: it writes the API's
// Dockerfile under it first, then every context file by its name, so a context file of that
// name comes later and replaces it (v0.190 apps/runner/pkg/docker/image_build.go:45-118,
// buildOpts Dockerfile "Dockerfile" at :161-163). contextTar leaves such a file out: the
// environment's dockerfile is the build's Dockerfile, as on every backend, even when the
// folder holds the same file (build_context = "." next to dockerfile = file("Dockerfile")).
const contextDockerfile = "Dockerfile"

// tarHash is the hash the context's tarball is stored and named under: the context's own
// content hash, or, for a context with a root Dockerfile (left out of the tarball), a hash
// derived from it, so that a tarball an older release stored with the Dockerfile in it is
// never reused.
func tarHash(bc *sandbox.BuildContext) string {
	for _, f := range bc.Files {
		if f.Path == contextDockerfile {
			sum := sha256.Sum256([]byte("trueforge-context/without-Dockerfile\n" + bc.Hash))
			return hex.EncodeToString(sum[:])
		}
	}
	return bc.Hash
}

// contextTar packs bc's files with their paths relative to the folder (Daytona's runner
// extracts every context tarball at the root of the build context, next to the
// Dockerfile), modes 0644 or 0755 and no times or owners, so the same files always make
// the same bytes. A root Dockerfile is left out (contextDockerfile).
func contextTar(dir string, bc *sandbox.BuildContext) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range bc.Files {
		if f.Path == contextDockerfile {
			continue
		}
		if err := addContextFile(tw, dir, bc, f); err != nil {
			return nil, fmt.Errorf("daytona: packing the build context %q: %w", dir, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("daytona: packing the build context %q: %w", dir, err)
	}
	return buf.Bytes(), nil
}

func addContextFile(tw *tar.Writer, dir string, bc *sandbox.BuildContext, f sandbox.ContextFile) error {
	r, err := bc.Open(dir, f)
	if err != nil {
		return err
	}
	defer r.Close()
	hdr := &tar.Header{Name: f.Path, Mode: int64(f.Mode.Perm()), Size: f.Size,
		ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	// Exactly Size bytes: a file that grew since it was hashed is cut, one that shrank
	// fails, and the hash check before this makes either a race, not a silent change.
	if _, err := io.CopyN(tw, r, f.Size); err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	return nil
}
