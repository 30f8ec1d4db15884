package daytona

import (
	"encoding/base64"
	"strings"
)

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
