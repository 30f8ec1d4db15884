//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// The keeper of a running sandbox is one process tree that holds all its namespaces:
//
//	unshare -Urm[n] sh -c <script>  user + mount (+ network, with egress) namespace; the
//	  (exec) bwrap                  script mounts the two overlays once, prepares the
//	    sandbox init (PID 1)        network namespace if it made one (netns.go), then
//	                                execs bwrap, which unshares the rest (sharing that
//	                                network namespace, or the host's, but unsharing it
//	                                under BlockNetwork) and runs the init
//	                                (sandboxinit.go) as PID 1
//
// Execs do not start any of this: they connect to the init's control socket and the init
// forks the command inside. The keeper's leader is in its own process group; its pid and
// start time are in run/keeper, so any process can find and kill it.
//
// The keeper lives as long as the Runtime that started it holds the write end of its
// lifeline pipe: Stop closes it (and kills), and so does the death of the owning
// process, whatever the cause. A restarted owner starts the keeper again on the next Exec.

// keeperStartWait bounds how long an Exec waits for a freshly started keeper.
const keeperStartWait = 20 * time.Second

func (r *Runtime) ctlSock(id string) string    { return filepath.Join(r.runDir(id), "ctl.sock") }
func (r *Runtime) keeperFile(id string) string { return filepath.Join(r.runDir(id), "keeper") }
func (r *Runtime) keeperLog(id string) string  { return filepath.Join(r.runDir(id), "keeper.log") }

// dialKeeper connects to the init of a running sandbox. The socket path may be longer
// than a sockaddr allows, so it is reached through an O_PATH descriptor of its directory.
func (r *Runtime) dialKeeper(id string) (*net.UnixConn, error) {
	fd, err := syscall.Open(r.runDir(id), oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	return net.DialUnix("unix", nil, &net.UnixAddr{Net: "unix", Name: "/proc/self/fd/" + strconv.Itoa(fd) + "/ctl.sock"})
}

// listenKeeper creates the control socket of a keeper about to start.
func (r *Runtime) listenKeeper(id string) (*os.File, error) {
	_ = os.Remove(r.ctlSock(id))
	fd, err := syscall.Open(r.runDir(id), oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Net: "unix", Name: "/proc/self/fd/" + strconv.Itoa(fd) + "/ctl.sock"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	defer ln.Close()
	return ln.File()
}

// connect returns a connection to the sandbox's init, starting the keeper first if none
// runs (a new sandbox, Start, or a restarted owner). The caller holds the sandbox lock
// shared and has checked that the sandbox is Running.
func (r *Runtime) connect(ctx context.Context, id string, info record) (*net.UnixConn, error) {
	if c, err := r.dialKeeper(id); err == nil {
		return c, nil
	}
	unlock, err := r.lockFile(filepath.Join(r.dir(id), "keeper.lock"), syscall.LOCK_EX)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if c, err := r.dialKeeper(id); err == nil {
		return c, nil
	}
	if err := r.startKeeper(ctx, id, info); err != nil {
		return nil, err
	}
	return r.dialKeeper(id)
}

// keeperAlive reports the recorded keeper's pid and start time if it still runs.
func (r *Runtime) keeperAlive(id string) (int, uint64, bool) {
	pid, start, err := readPidFile(r.keeperFile(id))
	if err != nil {
		return 0, 0, false
	}
	return pid, start, processAlive(pid, start)
}

// startKeeper starts the sandbox's keeper. The caller holds keeper.lock.
func (r *Runtime) startKeeper(ctx context.Context, id string, info record) error {
	if err := r.checkIntact(id); err != nil {
		return err
	}
	// A keeper that is alive but cannot be reached (its socket was removed underneath)
	// goes, and so does a dead one's lifeline.
	if pid, start, alive := r.keeperAlive(id); alive {
		if err := killExecProcs(ctx, pid, start, r.killWait()); err != nil {
			return err
		}
	}
	r.dropLifeline(id)
	if err := r.ensureData(ctx, id, info); err != nil {
		return err
	}
	layers, err := r.b.Layers(info.SnapshotID)
	if err != nil {
		return err
	}
	for _, d := range []string{"usr", "rest"} {
		w := filepath.Join(r.dataDir(id), "work", d)
		_ = removeAll(w)
		if err := os.MkdirAll(w, 0o700); err != nil {
			return err
		}
	}
	if err := r.writeEgressFiles(id, info); err != nil {
		return err
	}
	cg, err := r.limits.prepare(id, info.Limits)
	if err != nil {
		return err
	}
	ln, err := r.listenKeeper(id)
	if err != nil {
		return err
	}
	defer ln.Close()
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer lifeR.Close()
	goR, goW, err := os.Pipe()
	if err != nil {
		lifeW.Close()
		return err
	}
	defer goR.Close()
	defer goW.Close()
	logf, err := os.OpenFile(r.keeperLog(id), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		lifeW.Close()
		return err
	}
	defer logf.Close()

	script := r.keeperScript(id, layers, info)
	flags := "-Urm"
	if netPrepMode(info) != "" {
		flags += "n" // the sandbox's own network namespace, prepared by the script
	}
	cmd := exec.Command(r.unshare, flags, "/bin/sh", "-c", script)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + sandboxPath, "LC_ALL=C"}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, logf, logf
	cmd.ExtraFiles = []*os.File{ln, lifeR, goR} // fds 3, 4, 5
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		lifeW.Close()
		return err
	}
	start, err := processStartTime(cmd.Process.Pid)
	if err == nil {
		err = writeFileAtomic(r.keeperFile(id), []byte(strconv.Itoa(cmd.Process.Pid)+" "+strconv.FormatUint(start, 10)+"\n"), 0o600)
	}
	if err == nil {
		// Into the sandbox's cgroups (or under its rlimits) before it forks anything.
		err = cg.add(cmd.Process.Pid)
	}
	if err != nil {
		lifeW.Close()
		_ = killExecProcs(context.Background(), cmd.Process.Pid, start, r.killWait())
		_ = cmd.Wait()
		return err
	}
	if _, err := goW.Write([]byte{'\n'}); err != nil {
		lifeW.Close()
		_ = killExecProcs(context.Background(), cmd.Process.Pid, start, r.killWait())
		_ = cmd.Wait()
		return fmt.Errorf("start sandbox: %w; %s", err, r.keeperLogTail(id))
	}
	r.mu.Lock()
	r.lifelines[id] = lifeW
	r.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		r.mu.Lock()
		if r.lifelines[id] == lifeW {
			delete(r.lifelines, id)
		}
		r.mu.Unlock()
		lifeW.Close()
	}()
	return nil
}

func (r *Runtime) dropLifeline(id string) {
	r.mu.Lock()
	if w := r.lifelines[id]; w != nil {
		w.Close()
		delete(r.lifelines, id)
	}
	r.mu.Unlock()
}

// keeperLogTail describes why a keeper failed, from what it printed.
func (r *Runtime) keeperLogTail(id string) string {
	data, _ := os.ReadFile(r.keeperLog(id))
	s := strings.TrimSpace(string(data))
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	if s == "" {
		return "the sandbox setup printed nothing"
	}
	return "sandbox setup said: " + s
}

// stopKeeper kills the sandbox's keeper and everything in the sandbox and returns once
// all of it is gone.
func (r *Runtime) stopKeeper(ctx context.Context, id string) error {
	// The sandbox's pid namespace is looked up before the lifeline drops: once the init
	// has exited, the keeper may be gone before the namespace's other processes are, and
	// killExecProcs could no longer find them to wait for.
	ns := ""
	pid, start, alive := r.keeperAlive(id)
	if alive {
		ns = sandboxPidNS(pid)
	}
	r.dropLifeline(id)
	var errs []error
	if alive && processAlive(pid, start) {
		if err := killExecProcs(ctx, pid, start, r.killWait()); err != nil {
			errs = append(errs, err)
		}
	}
	if err := waitPidNSEmpty(ctx, ns, r.killWait()); err != nil {
		errs = append(errs, err)
	}
	// Whatever is left in the sandbox's cgroups (nothing, normally) goes too.
	if err := r.limits.kill(ctx, id, r.killWait()); err != nil {
		errs = append(errs, err)
	}
	_ = os.Remove(r.ctlSock(id))
	_ = os.Remove(r.keeperFile(id))
	return errors.Join(errs...)
}

// keeperScript renders the script "unshare -Urm[n]" runs: wait for the go-ahead (the
// cgroups are set up), mount the sandbox's two overlays, prepare the network namespace
// (when unshare made one), then exec bwrap with the init.
func (r *Runtime) keeperScript(id string, layers []string, info record) string {
	var sb strings.Builder
	sb.WriteString("set -e\nread -r _ <&5\nexec 5<&-\n")
	sb.WriteString(r.limits.scriptLimits(info.Limits))
	fmt.Fprintf(&sb, "cd %s\n", shq(r.b.snapshotsDir()))
	data := r.dataDir(id)
	var usr, rest []string
	for _, l := range layers {
		// Relative to the snapshots directory, to keep the option short.
		if rel, err := filepath.Rel(r.b.snapshotsDir(), l); err == nil && !strings.HasPrefix(rel, "..") {
			l = rel
		}
		usr = append(usr, l+"/usr")
		rest = append(rest, l)
	}
	usr = append(usr, r.b.HostUsr())
	for _, m := range []struct {
		name   string
		lowers []string
	}{{"usr", usr}, {"rest", rest}} {
		opts := fmt.Sprintf("userxattr,lowerdir=%s,upperdir=%s/upper/%s,workdir=%s/work/%s", strings.Join(m.lowers, ":"), data, m.name, data, m.name)
		fmt.Fprintf(&sb, "%s -n -i -t overlay overlay -o %s %s\n", shq(r.mount), shq(opts), shq(filepath.Join(r.dir(id), "mnt", m.name)))
	}
	if mode := netPrepMode(info); mode != "" {
		// The program itself brings lo up (and lets the helper bind port 53) as root of
		// the namespace's owner; it must not hold the control socket or the lifeline.
		fmt.Fprintf(&sb, "%s=%s %s %s 3<&- 4<&-\n", netPrepEnv, mode, shq(r.exe), netPrepArg)
	}
	if hasResolvConf(info.Egress) {
		sb.WriteString(resolvConfTarget(filepath.Join(r.dir(id), "mnt", "rest", "etc")))
	}
	// bwrap unshares everything but the network namespace of an egress sandbox (the one
	// unshare made and the script prepared) or the host's network.
	args := []string{r.bwrap, "--unshare-all"}
	if !info.BlockNetwork || netPrepMode(info) != "" {
		args = append(args, "--share-net")
	}
	args = append(args, "--die-with-parent", "--new-session", "--as-pid-1", "--hostname", "sandbox",
		"--uid", sandboxUID, "--gid", sandboxUID, "--cap-drop", "ALL", "--tmpfs", "/")
	for _, top := range TopDirs() {
		src := filepath.Join(r.dir(id), "mnt", "rest", top)
		if top == "usr" {
			src = filepath.Join(r.dir(id), "mnt", "usr")
		}
		args = append(args, "--bind", src, "/"+top)
	}
	for _, l := range hostRootLinks(r.b.hostRoot) {
		if l.target != "" {
			args = append(args, "--symlink", l.target, "/"+l.name)
		} else {
			args = append(args, "--ro-bind", "/"+l.name, "/"+l.name)
		}
	}
	args = append(args, "--bind", r.wsDir(id), "/workspace")
	args = append(args, scratchMounts(info.Limits.DiskMB)...)
	args = append(args, "--ro-bind", r.exe, initPath)
	args = append(args, r.egressArgs(id, info)...)
	args = append(args, "--remount-ro", "/", "--clearenv", "--setenv", initEnv, "1")
	if info.Egress != nil && info.Egress.Helper != "" {
		args = append(args, "--setenv", egressEnv, "1")
	}
	args = append(args, "--chdir", "/", "--", initPath)
	sb.WriteString("exec")
	for _, a := range args {
		sb.WriteString(" " + shq(a))
	}
	sb.WriteString("\n")
	return sb.String()
}

// The sandbox's tmpfs mounts hold their files in host memory: charged to the sandbox's
// memory cgroup when it has a memory limit, to nothing otherwise (and not to RLIMIT_AS
// either). So each has a size of its own, whatever the other limits:
//
//   - /tmp: the sandbox's disk cap (limits.disk_mb) when it has one, but never more than
//     tmpMaxMB (1 GiB): a disk cap is a budget of disk, not of memory, and a sandbox
//     without one gets tmpMaxMB too. Bigger scratch files belong in /workspace, which is
//     on the sandbox's disk.
//   - /dev/shm: devShmMB (64 MiB, as Docker gives a container), for POSIX shared memory
//     and semaphores (Python's multiprocessing, for one).
const (
	tmpMaxMB = 1024
	devShmMB = 64
)

// tmpSizeMB is the size of /tmp, in MiB, for a disk cap of diskMB (0: none).
func tmpSizeMB(diskMB int64) int64 {
	if diskMB > 0 && diskMB < tmpMaxMB {
		return diskMB
	}
	return tmpMaxMB
}

// scratchMounts are the bwrap arguments of /proc, /dev, /dev/shm and /tmp, the same for a
// sandbox and a build. /dev is bwrap's minimal one, read-only once /dev/shm is mounted
// in it, so that nothing can be created there (a file in its tmpfs would be host memory
// outside every limit); the device nodes, /dev/pts and /dev/shm are mounts of their own
// and stay writable. /tmp is world-writable and sticky as everywhere.
func scratchMounts(diskMB int64) []string {
	return []string{"--proc", "/proc", "--dev", "/dev",
		"--size", strconv.FormatInt(devShmMB<<20, 10), "--perms", "1777", "--tmpfs", "/dev/shm",
		"--remount-ro", "/dev",
		"--size", strconv.FormatInt(tmpSizeMB(diskMB)<<20, 10), "--perms", "1777", "--tmpfs", "/tmp"}
}

// sortedEnv renders an environment map as KEY=VALUE lines, by key.
func sortedEnv(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// checkIntact reports ErrLost when a sandbox's files vanished underneath the runtime.
func (r *Runtime) checkIntact(id string) error {
	for _, p := range []string{filepath.Join(r.dir(id), "mnt"), r.runDir(id)} {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sandbox %s: %s is missing: %w", id, filepath.Base(p), sandbox.ErrLost)
		}
	}
	return nil
}

// oPath is O_PATH, which package syscall does not name.
const oPath = 0x200000

// waitPidNSEmpty kills whatever is left in pid namespace ns ("" for none) until nothing
// is, or wait has passed.
func waitPidNSEmpty(ctx context.Context, ns string, wait time.Duration) error {
	if ns == "" {
		return nil
	}
	deadline := time.Now().Add(wait)
	for {
		left := killPidNS(ns)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of the sandbox still alive %s after SIGKILL: %s", wait, strings.Join(left, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
