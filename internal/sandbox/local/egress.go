//go:build linux

package local

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// The egress hook (CreateRequest.Egress). A sandbox with it has no network interface but
// lo, in a network namespace the keeper prepared so that the sandbox user may bind ports
// from 53 (netns.go). The directory of the harness's unix socket is bound read-only at
// sandbox.EgressSocketDir (the socket is then at sandbox.EgressSocketPath), its helper
// read-only at sandbox.EgressHelperPath, and Files read-only under /run/trueforge; a file
// named resolv.conf is also bound read-only over /etc/resolv.conf, so that every resolver
// in the sandbox asks the helper (egress.FileResolvConf is that file). The init starts
// the helper, as the sandbox user, in the sandbox's network namespace each time the
// sandbox starts, under the base seccomp filter but before it stacks the AF_UNIX filter
// on it (seccomp.go): the helper needs AF_UNIX sockets to reach the socket, which the
// commands may not create.
//
// The helper gets, as the descriptor sandbox.EgressReadyEnv names in its environment, the
// write end of a pipe that it closes once it listens; the init runs no command until
// then (at most helperReadyWait), so the first command finds the proxy up. A helper that
// ignores it delays every start by that much; one that exits ends the wait.
//
// What that exemption gives away: the helper runs as the same user as the commands, so a
// command that took it over could create AF_UNIX sockets, and nothing else: the helper
// runs under the rest of the filter (no user namespace, mount, ptrace, io_uring, keyctl,
// ...), and trueforge-netd makes itself not dumpable as it starts, so commands can
// neither ptrace it nor reach its memory, descriptors or environment through /proc
// (TestAttackNetdTakeover). The only unix sockets it can reach are the egress socket (no other host path is in the
// sandbox) and abstract ones of the sandbox's own network namespace, so this is the
// access the proxy already grants on 127.0.0.1. A helper that exits is not restarted
// until the sandbox is stopped and started again.
//
// Why a directory: a bind mount pins an inode. Bound by itself, the socket file would
// stay the one the sandbox started with, and a harness listening anew at the same path
// (every harness process creates its own listener) would be out of reach until the
// sandbox restarted, killing its processes. The directory keeps its inode while the
// socket in it is replaced, and each connect looks the name up afresh. Connecting needs
// no write access to the mount (the kernel refuses writes to read-only mounts only for
// files, directories and links), so the directory is bound read-only: the sandbox user,
// which maps to the directory's owner, cannot remove, replace or chmod the socket, nor
// add anything beside it. The directory must therefore hold nothing but the socket and
// be writable by the runtime's user alone; checkEgressDir enforces both at Create and at every
// keeper start, so nothing else of the host is ever bound, and each sandbox has its own
// directory (its harness's choice), never seeing another's.
// egressResolvConf is the file of Egress.Files that is also bound at /etc/resolv.conf.
const egressResolvConf = "resolv.conf"

// egressReserved are names not usable in Egress.Files: they are taken under /run/trueforge.
// ("egress" is the socket's directory).
var egressReserved = map[string]bool{"init": true, "netd": true, "egress": true}

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
		if p.field == "egress.socket" {
			// The socket may be missing, at create as at a start: a warm pool member's
			// proxy is served only once a session claims it, and a harness between two
			// listeners has none. Whatever is at its path must be a socket.
			if fi, err := os.Lstat(p.path); err == nil && fi.Mode()&os.ModeSocket == 0 {
				return fmt.Errorf("egress.socket %q is not a unix socket", p.path)
			} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%s: %w", p.field, err)
			}
			if err := checkEgressDir(p.path); err != nil {
				return err
			}
			continue
		}
		fi, err := os.Stat(p.path)
		if err != nil {
			return fmt.Errorf("%s: %w", p.field, err)
		}
		if p.field == "egress.helper" && (!fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0) {
			return fmt.Errorf("egress.helper %q is not an executable file", p.path)
		}
	}
	for name, data := range e.Files {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || egressReserved[name] {
			return fmt.Errorf("egress.files: %q is not a usable file name (one path element, not init, netd or egress)", name)
		}
		if len(data) > 16<<20 {
			return fmt.Errorf("egress.files: %q is over 16 MiB", name)
		}
	}
	return nil
}

// checkEgressDir checks that the directory of the egress socket may be bound into a
// sandbox: named sandbox.EgressSocketName, in a real directory (not a link) owned by this
// user that group and others cannot write, holding nothing else. The socket itself may
// be missing (a harness between two listeners): connections then fail until it is back.
func checkEgressDir(socket string) error {
	if filepath.Base(socket) != sandbox.EgressSocketName {
		return fmt.Errorf("egress.socket %q: must be named %s, alone in a directory of its own (the directory is bound into the sandbox)", socket, sandbox.EgressSocketName)
	}
	dir := filepath.Dir(socket)
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("egress.socket: its directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("egress.socket %q: its directory must be a directory (not a link) owned by uid %d that group and others cannot write (mode 0700, say); it is bound into the sandbox", socket, os.Getuid())
	}
	names, err := readDirNames(dir)
	if err != nil {
		return fmt.Errorf("egress.socket: its directory: %w", err)
	}
	for _, n := range names {
		if n != sandbox.EgressSocketName {
			return fmt.Errorf("egress.socket %q: its directory holds %q besides the socket; it is bound into the sandbox, so it must hold the socket alone", socket, n)
		}
	}
	return nil
}

// readDirNames lists a directory's entries, unsorted.
func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
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
	// Checked again at every start: the directory is bound as it is then.
	if err := checkEgressDir(rec.Egress.Socket); err != nil {
		return err
	}
	for name, data := range rec.Egress.Files {
		if err := writeFileAtomic(filepath.Join(dir, name), data, 0o444); err != nil {
			return err
		}
	}
	return nil
}

// egressArgs are the bwrap arguments of the hook, from what the setup step staged.
func egressArgs(rec record) []string {
	e := rec.Egress
	if e == nil {
		return nil
	}
	args := []string{"--ro-bind", stagePath("egress"), sandbox.EgressSocketDir}
	if e.Helper != "" {
		args = append(args, "--ro-bind", stagePath("netd"), sandbox.EgressHelperPath)
	}
	for _, name := range slices.Sorted(maps.Keys(e.Files)) {
		args = append(args, "--ro-bind", stagePath(filepath.Join("files", name)), filepath.Join("/run/trueforge", name))
	}
	if hasResolvConf(e) {
		// After /etc is bound (egressArgs come after the top directories).
		args = append(args, "--ro-bind", stagePath(filepath.Join("files", egressResolvConf)), "/etc/resolv.conf")
	}
	return args
}

// hasResolvConf reports whether the hook brings a resolv.conf for /etc/resolv.conf.
func hasResolvConf(e *sandbox.Egress) bool {
	if e == nil {
		return false
	}
	_, ok := e.Files[egressResolvConf]
	return ok
}
