package local

import (
	"fmt"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// The local backend builds every snapshot on the platform image with a shell script, so
// it takes a Dockerfile only when that is what the Dockerfile says: `FROM platform`
// followed by RUN instructions (comments and blank lines aside). Its RUN lines become
// the build script, each run by `sh -e` in order, as the lines of build_script are.
// Anything else (another base image, COPY or ADD from a build context, ENV, WORKDIR...)
// is refused at plan time by CheckEnvironment and again by the builder.

// dockerfileScript returns the build script of a `FROM platform` Dockerfile.
func dockerfileScript(dockerfile string) (string, error) {
	var script strings.Builder
	from := false
	for _, ins := range sandbox.DockerfileInstructions(dockerfile) {
		kw, rest, _ := strings.Cut(ins, " ")
		rest = strings.TrimSpace(rest)
		switch kw = strings.ToUpper(kw); {
		case !from && kw == "FROM":
			if base := strings.Fields(rest); len(base) != 1 || base[0] != sandbox.PlatformImage {
				return "", fmt.Errorf("the Dockerfile starts FROM %q; the local backend builds only on the %q image: write `FROM %s`, or use a daytona sandbox provider for other images",
					rest, sandbox.PlatformImage, sandbox.PlatformImage)
			}
			from = true
		case !from:
			return "", fmt.Errorf("the Dockerfile's first instruction is %s, not FROM: start it with `FROM %s`", kw, sandbox.PlatformImage)
		case kw == "RUN":
			// A subshell per RUN, as each RUN is its own shell in a Docker build.
			script.WriteString("(\n" + rest + "\n)\n")
		default:
			return "", fmt.Errorf("the Dockerfile has a %s instruction; after `FROM %s` the local backend runs RUN instructions only (they become the build script): "+
				"put the step in a RUN, or use a daytona sandbox provider for COPY, ADD, build contexts and the rest of the Dockerfile syntax", kw, sandbox.PlatformImage)
		}
	}
	if !from {
		return "", fmt.Errorf("the Dockerfile has no FROM instruction: start it with `FROM %s`", sandbox.PlatformImage)
	}
	return script.String(), nil
}

// buildScriptOf is the script a build of spec runs: build_script, or the RUN lines of its
// Dockerfile (checkBuildSpec has refused any other Dockerfile).
func buildScriptOf(spec sandbox.SnapshotSpec) string {
	if spec.Dockerfile == "" {
		return spec.BuildScript
	}
	s, _ := dockerfileScript(spec.Dockerfile)
	return s
}

// checkBuildSpec refuses what the local builder cannot build: a GPU, a Dockerfile other
// than `FROM platform` plus RUN lines, a build context, a region, a registry or an
// entrypoint.
func checkBuildSpec(spec sandbox.SnapshotSpec) error {
	if ps := buildInputProblems(spec); len(ps) > 0 {
		return fmt.Errorf("%s: %s", ps[0].Attribute, ps[0].Detail)
	}
	return nil
}

// buildInputProblems are CheckEnvironment's problems with the build inputs added after
// the first release.
func buildInputProblems(spec sandbox.SnapshotSpec) []sandbox.Problem {
	var ps []sandbox.Problem
	if spec.GPU > 0 || spec.GPUType != "" {
		attr := "gpu"
		if spec.GPU <= 0 {
			attr = "gpu_type"
		}
		ps = append(ps, sandbox.Problem{Attribute: attr, Summary: "GPUs Not Supported By Backend",
			Detail: fmt.Sprintf("The local backend has no GPUs: its sandboxes run on this host without device access (gpu = %d, gpu_type = %q). "+
				"Remove gpu and gpu_type, or use a daytona sandbox provider, whose snapshots can ask for GPUs.", spec.GPU, spec.GPUType)})
	}
	if spec.Dockerfile != "" {
		if _, err := dockerfileScript(spec.Dockerfile); err != nil {
			ps = append(ps, sandbox.Problem{Attribute: "dockerfile", Summary: "Dockerfile Not Supported By Backend",
				Detail: "On the local backend " + err.Error() + "."})
		}
	}
	if spec.ContextHash != "" {
		ps = append(ps, sandbox.Problem{Attribute: "build_context", Summary: "Build Context Not Supported By Backend",
			Detail: "The local backend does not copy a build context into its snapshots: a Dockerfile there may only RUN commands after `FROM platform`. " +
				"Remove build_context (fetch or write the files in a RUN or in build_script), or use a daytona sandbox provider."})
	}
	if spec.Region != "" {
		ps = append(ps, sandbox.Problem{Attribute: "region", Summary: "Region Not Supported By Backend",
			Detail: fmt.Sprintf("The local backend runs sandboxes on this host, which has no regions; got region = %q. Remove region, or use a daytona sandbox provider.", spec.Region)})
	}
	if spec.Registry != "" {
		ps = append(ps, sandbox.Problem{Attribute: "registry", Summary: "Registry Not Supported By Backend",
			Detail: fmt.Sprintf("The local backend pulls no images: it builds only on the %q image, so registry %q would never be used. Remove registry, or use a daytona sandbox provider.",
				sandbox.PlatformImage, spec.Registry)})
	}
	if len(spec.Entrypoint) > 0 {
		// Refused rather than ignored: a snapshot that silently never runs its entrypoint
		// would differ from the same environment on Daytona in what its sandboxes do.
		ps = append(ps, sandbox.Problem{Attribute: "entrypoint", Summary: "Entrypoint Not Supported By Backend",
			Detail: fmt.Sprintf("Local sandboxes have no entry process: the harness starts each command itself, so entrypoint %q would never run. "+
				"Remove entrypoint (start what it starts from a command or a RUN), or use a daytona sandbox provider, whose sandboxes run their snapshot's entrypoint.", spec.Entrypoint)})
	}
	return ps
}
