package daytona

import (
	"encoding/base64"
	"strings"
)

// Dockerfile renders the Dockerfile of a snapshot build: `FROM image`, then, if script is not
// blank, one RUN that writes the script (base64, so any bytes survive Dockerfile parsing and
// no heredoc support is needed) to a temp file and runs it with `sh -e`, then removes it.
// The script runs as the image's build user in the image's default working directory.
func Dockerfile(image, script string) string {
	var b strings.Builder
	b.WriteString("FROM " + image + "\n")
	if strings.TrimSpace(script) != "" {
		enc := base64.StdEncoding.EncodeToString([]byte(script))
		b.WriteString("RUN echo " + enc + " | base64 -d > /tmp/trueforge-build.sh" +
			" && sh -e /tmp/trueforge-build.sh && rm -f /tmp/trueforge-build.sh\n")
	}
	return b.String()
}
