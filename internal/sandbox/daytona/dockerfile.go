package daytona

import (
	"encoding/base64"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// workspaceLine ends every Dockerfile the Builder sends (withWorkspace).
const workspaceLine = "WORKDIR " + sandbox.WorkspaceDir

// withWorkspace ends a build's Dockerfile so that every snapshot's sandboxes have the
// workspace at the path the local backend has it, /workspace, owned by the user the image
// runs as, and start there:
//   - when that user is known (user: the platform image's, or the final stage's USER) and
//     is not root, a RUN as root makes /workspace and gives it, with whatever COPY or RUN
//     put in it as root, to the user (chown -R), then switches back to the user;
//   - in any case it ends with `WORKDIR /workspace`. BuildKit makes a missing WORKDIR, with
//     its parents, owned by the stage's USER (moby/buildkit frontend/dockerfile/
//     dockerfile2llb/convert.go dispatchWorkdir: llb.Mkdir with llb.WithParents and
//     llb.WithUser of the image's Config.User), so an image whose user is not known (an
//     `image` other than the platform's) still gets a workspace its user owns, unless an
//     instruction of its own made /workspace as root. Daytona's runners build with
//     BuildKit (v0.190 apps/runner/pkg/docker/image_build.go:193-198); a runner set to the
//     legacy builder makes the directory root's.
func withWorkspace(dockerfile, user string) string {
	if !strings.HasSuffix(dockerfile, "\n") {
		dockerfile += "\n"
	}
	if user != "" && user != "root" && user != "0" {
		dockerfile += "USER root\nRUN mkdir -p " + sandbox.WorkspaceDir + " && chown -R " + user + " " + sandbox.WorkspaceDir + "\nUSER " + user + "\n"
	}
	return dockerfile + workspaceLine + "\n"
}

// hasWorkspace reports whether a snapshot's Dockerfile made the workspace (withWorkspace):
// snapshots built before it did have no /workspace, which their sandboxes' users cannot
// create (outdatedLayout).
func hasWorkspace(dockerfile string) bool {
	for _, l := range sandbox.DockerfileInstructions(dockerfile) {
		if l == workspaceLine {
			return true
		}
	}
	return false
}

// PlatformImageUser is the user the platform image (DefaultReleaseImage, a
// daytonaio/sandbox image) runs as: its Dockerfile creates `daytona` with passwordless
// sudo and ends with `USER daytona` (v0.190 images/sandbox/Dockerfile:77-78,96).
// Sandboxes of the platform image, and commands in them, run as this user.
const PlatformImageUser = "daytona"

// Dockerfile renders the Dockerfile of a snapshot build: `FROM image`, then, if script is not
// blank, one RUN that writes the script (base64, so any bytes survive Dockerfile parsing and
// no heredoc support is needed) to a temp file and runs it with `sh -e`, then removes it.
//
// The script runs as root, as it does on the local backend: when user, the image's own
// user, is another one, the RUN is wrapped in `USER root` ... `USER <user>`, so that the
// snapshot's sandboxes still run as the image's user. user is "" when it is not known
// (an image other than the platform image: its default user is kept for the script too).
// The script runs in the image's default working directory.
func Dockerfile(image, user, script string) string {
	var b strings.Builder
	b.WriteString("FROM " + image + "\n")
	if strings.TrimSpace(script) == "" {
		return b.String()
	}
	switchUser := user != "" && user != "root" && user != "0"
	if switchUser {
		b.WriteString("USER root\n")
	}
	enc := base64.StdEncoding.EncodeToString([]byte(script))
	b.WriteString("RUN echo " + enc + " | base64 -d > /tmp/trueforge-build.sh" +
		" && sh -e /tmp/trueforge-build.sh && rm -f /tmp/trueforge-build.sh\n")
	if switchUser {
		b.WriteString("USER " + user + "\n")
	}
	return b.String()
}
