package daytonatest

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Who may write /workspace in a sandbox. A Daytona sandbox runs its commands and file
// calls as the image's USER: the runner starts the daemon as the container's entrypoint,
// or with `docker exec` and no user (v0.190 apps/runner/pkg/docker/container_configs.go:
// 143-172), so the daemon, and each command it runs, has the image's user
// (DAYTONA_SANDBOX_USER is not read by the v0.190 daemon). The emulator's local box runs
// everything as one unprivileged user, so it models the one directory that decides
// whether a sandbox works: the workspace, its owner being the user the image's build made
// it as (workspaceOwner). A user who is not root and does not own /workspace cannot create
// it (`mkdir -p /workspace` fails: `/` is root's) nor write in it; the emulator refuses
// those commands and uploads as the daemon would see them refused (guardBox).

// workspaceOwner follows the final stage of a build's Dockerfile as BuildKit would and
// returns the user who owns /workspace in the image ("" when no instruction makes it):
//   - WORKDIR makes a missing directory and its parents owned by the stage's USER at that
//     point (moby/buildkit frontend/dockerfile/dockerfile2llb/convert.go dispatchWorkdir:
//     llb.Mkdir with llb.WithParents and llb.WithUser of the image's Config.User);
//   - COPY and ADD make missing destination directories as root, or as their --chown user;
//   - a RUN as root that chowns /workspace gives it to that user; a RUN that makes it
//     (mkdir) makes it its user's.
func workspaceOwner(dockerfile string, userOf func(image string) string) string {
	owner, dir := "", "/"
	walkUsers(dockerfile, userOf, func(kw, rest, user string) bool {
		switch kw {
		case "FROM":
			owner, dir = "", "/"
		case "WORKDIR":
			dir = path.Join(dir, rest)
			if owner == "" && underWorkspace(dir) {
				owner = user
			}
		case "COPY", "ADD":
			by := "root"
			var args []string
			for _, a := range strings.Fields(rest) {
				if c, ok := strings.CutPrefix(a, "--chown="); ok {
					by, _, _ = strings.Cut(c, ":")
				} else if !strings.HasPrefix(a, "--") {
					args = append(args, a)
				}
			}
			if len(args) >= 2 && owner == "" && underWorkspace(path.Join(dir, args[len(args)-1])) {
				owner = by
			}
		case "RUN":
			if m := chownWorkspaceRE.FindStringSubmatch(rest); m != nil && (user == "root" || user == "0") {
				owner = m[1]
			} else if owner == "" && mkdirWorkspaceRE.MatchString(rest) {
				owner = user
			}
		}
		return true
	})
	return owner
}

var (
	chownWorkspaceRE = regexp.MustCompile(`chown\s+(?:-R\s+)?([A-Za-z0-9_.-]+)(?::\S*)?\s+/workspace(?:\s|$|&|;)`)
	mkdirWorkspaceRE = regexp.MustCompile(`mkdir\s+(?:-p\s+)?/workspace(?:\s|$|&|;)`)
	// chownOnlyRE: a RUN that only makes /workspace and gives it to a user.
	chownOnlyRE = regexp.MustCompile(`^mkdir -p /workspace && chown (?:-R )?\S+ /workspace$`)
)

func underWorkspace(p string) bool {
	return p == sandbox.WorkspaceDir || strings.HasPrefix(p, sandbox.WorkspaceDir+"/")
}

// sandboxUser is who a new sandbox of sn runs as and who owns its /workspace: a build's
// final USER (buildUsers) and workspaceOwner, or for a snapshot made from an image the
// image's user and no workspace.
// Called with mu held.
func (s *Server) sandboxUser(sn *snap) (user, owner string) {
	in, st := sn.inputs, s.bis()
	switch {
	case in != nil && in.BuildInfo != nil:
		return in.user, workspaceOwner(in.dockerfile, st.userOf)
	case sn.ImageName != "":
		return st.userOf(sn.ImageName), ""
	}
	return "daytona", ""
}

// guardBox refuses what the sandbox's user may not write in /workspace (see the top of
// this file); everything else goes to the box.
type guardBox struct {
	box
	user, owner string
}

// guard wraps bx for sb: its volumes answer as mount-s3 (onVolumes, mounts3.go); a root
// sandbox is otherwise unguarded.
func guard(bx box, sb *sbox) box {
	bx = onVolumes(bx, sb)
	if sb.runAs == "root" || sb.runAs == "0" {
		return bx
	}
	return guardBox{box: bx, user: sb.runAs, owner: sb.wsOwner}
}

// deniedPath reports whether the user may not write p: in /workspace unless the user owns
// it (`mkdir -p /workspace` is allowed when it exists: mkdir writes nothing then), or in
// another user's home (/home/<name>, made by useradd -m as that user's).
func (g guardBox) deniedPath(p string, mkdir bool) bool {
	if underWorkspace(p) {
		if g.owner == g.user || (mkdir && p == sandbox.WorkspaceDir && g.owner != "") {
			return false
		}
		return true
	}
	if rest, ok := strings.CutPrefix(p, "/home/"); ok {
		name, _, _ := strings.Cut(rest, "/")
		return name != "" && name != g.user
	}
	return false
}

func (g guardBox) denied(p string) error {
	return fmt.Errorf("open %s: %w (the sandbox runs as %s; /workspace is %s)", p, fs.ErrPermission, g.user, g.ownerText())
}

func (g guardBox) ownerText() string {
	if g.owner == "" {
		return "missing, and / is root's"
	}
	return g.owner + "'s"
}

func (g guardBox) write(id, p string, r io.Reader) error {
	if g.deniedPath(path.Clean(p), false) {
		return g.denied(p)
	}
	return g.box.write(id, p, r)
}

// exec refuses a command that writes where the user may not (deniedPath; rootOnly's scan
// of mkdir, touch, redirections ...), a relative path being relative to cwd.
func (g guardBox) exec(ctx context.Context, id, command, cwd string, env map[string]string, limit time.Duration) (execResult, error) {
	if p := deniedWrite(command, cwd, g.deniedPath); p != "" {
		return execResult{code: 1, out: "sh: 1: cannot create " + p + ": Permission denied\n"}, nil
	}
	return g.box.exec(ctx, id, command, cwd, env, limit)
}

// deniedWrite names the first path that command writes and denied refuses ("" for none).
func deniedWrite(command, cwd string, denied func(p string, mkdir bool) bool) string {
	resolve := func(a string) string {
		a = strings.Trim(a, `"'`)
		if !path.IsAbs(a) {
			if cwd == "" {
				return ""
			}
			a = path.Join(cwd, a)
		}
		return path.Clean(a)
	}
	for _, c := range shellSplitRE.Split(command, -1) {
		f := strings.Fields(c)
		if len(f) == 0 {
			continue
		}
		for _, m := range redirectRE.FindAllStringSubmatch(c, -1) {
			if p := resolve(m[1]); p != "" && denied(p, false) {
				return p
			}
		}
		if !writeCmdRE.MatchString(f[0]) {
			continue
		}
		for _, a := range f[1:] {
			if strings.HasPrefix(a, "-") {
				continue
			}
			if p := resolve(a); p != "" && denied(p, f[0] == "mkdir") {
				return p
			}
		}
	}
	return ""
}
