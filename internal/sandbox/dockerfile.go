package sandbox

import (
	"fmt"
	"strings"
)

// CheckDockerfile reports a Dockerfile whose first instruction, past comments, blank
// lines, parser directives and ARG lines, is not FROM with an image: every builder needs
// a base, and the provider asks this at plan time of every backend.
func CheckDockerfile(dockerfile string) error {
	for line := range strings.SplitSeq(dockerfile, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "ARG":
			continue
		case "FROM":
			if len(f) < 2 {
				return fmt.Errorf("FROM names no image; write FROM followed by an image, for example FROM python:3.12-slim")
			}
			return nil
		}
		return fmt.Errorf("its first instruction is %s; a Dockerfile must start from an image: begin it with FROM, for example FROM python:3.12-slim", strings.ToUpper(f[0]))
	}
	return fmt.Errorf("it holds no instructions; begin it with FROM and an image, for example FROM python:3.12-slim")
}

// DockerfileInstructions splits a Dockerfile into instructions, joining continued lines
// and dropping comments and blank lines (a last line continued past the end is kept).
// The local backend reads its builds by it, and the Daytona emulator replays them.
func DockerfileInstructions(dockerfile string) []string {
	var out []string
	var cur strings.Builder
	for l := range strings.SplitSeq(dockerfile, "\n") {
		t := strings.TrimSpace(l)
		if cur.Len() == 0 && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if c, ok := strings.CutSuffix(t, `\`); ok {
			cur.WriteString(c + " ")
			continue
		}
		cur.WriteString(t)
		out = append(out, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}
