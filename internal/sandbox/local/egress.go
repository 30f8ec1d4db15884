//go:build linux

package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// The egress hook (CreateRequest.Egress). A sandbox with it has no network interface but
// lo. The harness's unix socket is bound at sandbox.EgressSocketPath, its helper read-only
// at sandbox.EgressHelperPath, and Files read-only under /run/trueforge. The init starts
// the helper, as the sandbox user, in the sandbox's network namespace each time the
// sandbox starts, before it installs the seccomp filter: the helper needs AF_UNIX
// sockets to reach the bound socket, which the filter refuses to every command.
//
// What that exemption gives away: the helper runs as the same user as the commands, so a
// command that takes it over (its memory through /proc, say) can create AF_UNIX sockets.
// The only unix sockets it can reach are the egress socket (no other host path is in the
// sandbox) and abstract ones of the sandbox's own network namespace, so this is the
// access the proxy already grants on 127.0.0.1. A helper that exits is not restarted
// until the sandbox is stopped and started again.
//
// The socket is bound by inode when the sandbox starts: a harness that replaces the
// socket file (a restarted proxy listening anew at the same path) must stop and start its
// running sandboxes, or keep the listening socket alive across its own restarts.

// egressFileNames are reserved under /run/trueforge.
var egressReserved = map[string]bool{"init": true, "netd": true, "egress.sock": true}

func checkEgress(e *sandbox.Egress) error {
	if e == nil {
		return nil
	}
	if e.Socket == "" {
		return errors.New("egress.socket: the harness's unix socket path is required")
	}
	for _, p := range []struct{ field, path string }{{"egress.socket", e.Socket}, {"egress.helper", e.Helper}} {
		if p.path == "" {
			continue
		}
		if !filepath.IsAbs(p.path) {
			return fmt.Errorf("%s %q: must be an absolute path", p.field, p.path)
		}
		fi, err := os.Stat(p.path)
		if err != nil {
			return fmt.Errorf("%s: %w", p.field, err)
		}
		if p.field == "egress.socket" && fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("egress.socket %q is not a unix socket", p.path)
		}
		if p.field == "egress.helper" && (!fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0) {
			return fmt.Errorf("egress.helper %q is not an executable file", p.path)
		}
	}
	for name, data := range e.Files {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || egressReserved[name] {
			return fmt.Errorf("egress.files: %q is not a usable file name (one path element, not init, netd or egress.sock)", name)
		}
		if len(data) > 16<<20 {
			return fmt.Errorf("egress.files: %q is over 16 MiB", name)
		}
	}
	return nil
}

// writeEgressFiles writes the hook's files into egress/, from which they are bound.
func (r *Runtime) writeEgressFiles(id string, rec record) error {
	dir := filepath.Join(r.dir(id), "egress")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if rec.Egress == nil {
		return nil
	}
	for name, data := range rec.Egress.Files {
		if err := writeFileAtomic(filepath.Join(dir, name), data, 0o444); err != nil {
			return err
		}
	}
	return nil
}

// egressArgs are the bwrap arguments of the hook.
func (r *Runtime) egressArgs(id string, rec record) []string {
	e := rec.Egress
	if e == nil {
		return nil
	}
	args := []string{"--bind", e.Socket, sandbox.EgressSocketPath}
	if e.Helper != "" {
		args = append(args, "--ro-bind", e.Helper, sandbox.EgressHelperPath)
	}
	for name := range e.Files {
		args = append(args, "--ro-bind", filepath.Join(r.dir(id), "egress", name), filepath.Join("/run/trueforge", name))
	}
	return args
}
