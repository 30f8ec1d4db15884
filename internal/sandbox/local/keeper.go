//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
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
//	this program, keeper mode       started ahead (spare.go) in a user namespace of its
//	  (exec) bwrap                  own (unprivileged) or none (root); given its orders,
//	    sandbox init (PID 1)        it makes the mount (+ network, with egress)
//	                                namespace, mounts the two overlays once (setup.go),
//	                                prepares the network namespace if it made one
//	                                (netns.go), then execs bwrap, which unshares the rest
//	                                (sharing that network namespace, or the host's, but
//	                                unsharing it under BlockNetwork) and runs the init
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
	layers, err := r.prepareKeeper(ctx, id, &info)
	if err != nil {
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
	logf, err := os.OpenFile(r.keeperLog(id), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		lifeW.Close()
		return err
	}
	defer logf.Close()

	if err := writePlan(r.planFile(id), r.keeperPlan(id, layers, info)); err != nil {
		lifeW.Close()
		return err
	}
	// A keeper process started ahead (spare.go): it makes the mount (and, for egress,
	// network) namespace when its orders come; root's setup step then maps the sandbox
	// into its id slot.
	sp, err := r.takeSpare()
	if err != nil {
		lifeW.Close()
		return err
	}
	cmd, pid := sp.cmd, sp.cmd.Process.Pid
	err = writeFileAtomic(r.keeperFile(id), keeperPidLine(pid, sp.start), 0o600)
	if err == nil {
		// Into the sandbox's cgroups (or under its rlimits) before it forks anything.
		err = cg.add(pid)
	}
	if err == nil {
		err = sp.send(r.planFile(id), ln, lifeR, logf)
	}
	if err != nil {
		lifeW.Close()
		_ = killExecProcs(context.Background(), pid, sp.start, r.killWait())
		sp.wait()
		return fmt.Errorf("start sandbox: %w; %s", err, r.keeperLogTail(id))
	}
	r.mu.Lock()
	r.lifelines[id] = lifeW
	r.mu.Unlock()
	go func() {
		sp.wait()
		// Said in the log, so that a keeper that died without a word (a signal, say)
		// still explains itself to keeperLogTail.
		if f, err := os.OpenFile(r.keeperLog(id), os.O_WRONLY|os.O_APPEND, 0); err == nil {
			fmt.Fprintf(f, "%s %s\n", keeperExitedPrefix, cmd.ProcessState)
			f.Close()
		}
		r.mu.Lock()
		if r.lifelines[id] == lifeW {
			delete(r.lifelines, id)
		}
		r.mu.Unlock()
		lifeW.Close()
	}()
	return nil
}

// prepareKeeper readies what a new keeper of sandbox id starts on: an old keeper and its
// lifeline gone, the data, the volumes' images mounted, an id slot (recorded in info), a
// fresh scratch and the egress files. It returns the snapshot's layers.
func (r *Runtime) prepareKeeper(ctx context.Context, id string, info *record) ([]string, error) {
	if err := r.checkIntact(id); err != nil {
		return nil, err
	}
	// A keeper that is alive but cannot be reached (its socket was removed underneath)
	// goes, and so does a dead one's lifeline.
	if pid, start, alive := r.keeperAlive(id); alive {
		if err := killExecProcs(ctx, pid, start, r.killWait()); err != nil {
			return nil, err
		}
	}
	r.dropLifeline(id)
	if err := r.ensureData(ctx, id, *info); err != nil {
		return nil, err
	}
	for _, v := range info.Volumes {
		// After a reboot a volume's image is not mounted: binding its directory would
		// give the sandbox the empty directory under it, on the host filesystem.
		if err := ensureVolumeMounted(ctx, v.Dir); err != nil {
			return nil, err
		}
	}
	layers, err := r.b.Layers(info.SnapshotID)
	if err != nil {
		return nil, err
	}
	if err := r.ensureSlot(ctx, id, info); err != nil {
		return nil, err
	}
	if err := r.resetScratch(id, *info); err != nil {
		return nil, err
	}
	if err := r.writeEgressFiles(id, *info); err != nil {
		return nil, err
	}
	return layers, nil
}

func (r *Runtime) dropLifeline(id string) {
	r.mu.Lock()
	if w := r.lifelines[id]; w != nil {
		w.Close()
		delete(r.lifelines, id)
	}
	r.mu.Unlock()
}

// keeperExitedPrefix starts the line the runtime adds to a keeper's log when it ends.
const keeperExitedPrefix = "[trueforge] keeper ended:"

// keeperLogTail describes why a keeper failed, from what it printed and how it ended.
// The caller has just seen it fail, so when this runtime started it, it waits a
// little for its end to be recorded.
func (r *Runtime) keeperLogTail(id string) string {
	r.mu.Lock()
	_, ours := r.lifelines[id]
	r.mu.Unlock()
	var data []byte
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		data, _ = os.ReadFile(r.keeperLog(id))
		if !ours || strings.Contains(string(data), keeperExitedPrefix) || time.Now().After(deadline) {
			break
		}
	}
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
		var pin *os.File
		if ns, pin = pinSandboxPidNS(pid); pin != nil {
			defer pin.Close()
		}
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

func (r *Runtime) planFile(id string) string { return filepath.Join(r.runDir(id), "setup.json") }

// keeperPlan is what the setup step of the sandbox's keeper does: stage the snapshot's
// layers, the host /usr, the workspace, /tmp, the init and the egress hook's files, mount
// the two overlays, prepare the network, then exec bwrap. Everything bwrap binds comes
// from the staging directory.
func (r *Runtime) keeperPlan(id string, layers []string, info record) setupPlan {
	ids := info.IDs
	mapped := func(kind string) string {
		if ids == nil {
			return mapNone
		}
		return kind
	}
	p := setupPlan{IDs: ids, SandboxUser: sandboxUIDn, Unshare: r.unshare, Sleep: r.sleep,
		Rlimits: r.limits.setupRlimits(info.Limits)}
	p.Binds = append(p.Binds,
		stageBind{Src: r.b.snapshotsDir(), Dst: "L", Map: mapped(mapSlot)},
		stageBind{Src: r.b.HostUsr(), Dst: "H", Map: mapped(mapSlot)},
		stageBind{Src: r.wsDir(id), Dst: "ws"},
		stageBind{Src: r.tmpScratch(id), Dst: "tmp"},
		stageBind{Src: r.exe, Dst: "init"},
	)
	p.Binds = append(p.Binds, volumeBinds(info.Volumes, mapped)...)
	data := r.dataDir(id)
	usr, rest := stagedLowers(r.b.snapshotsDir(), layers)
	p.Overlays = []stageOverlay{
		{Dst: "usr", Lowers: append(usr, "H"), Upper: filepath.Join(data, "upper", "usr"), Work: filepath.Join(data, "work", "usr")},
		{Dst: "rest", Lowers: rest, Upper: filepath.Join(data, "upper", "rest"), Work: filepath.Join(data, "work", "rest")},
	}
	p.NetPrep = netPrepMode(info) != ""
	if nice, err := ownNice(); err == nil && ids != nil {
		p.Nice = &nice
	}
	if e := info.Egress; e != nil {
		p.Binds = append(p.Binds,
			stageBind{Src: filepath.Dir(e.Socket), Dst: "egress", Map: mapped(mapUser)},
			stageBind{Src: filepath.Join(r.dir(id), "egress"), Dst: "files", Map: mapped(mapUser)})
		if e.Helper != "" {
			p.Binds = append(p.Binds, stageBind{Src: e.Helper, Dst: "netd"})
		}
		if hasResolvConf(e) {
			p.ResolvConf = "rest/etc"
		}
	}
	p.Argv = r.bwrapArgs(info)
	p.LeaveHost = true
	return p
}

// stagedLowers turns layer directories (under snapshots) into the lowerdir entries of
// the usr and rest overlays, relative to the staging directory, where the snapshots
// directory is staged as "L".
func stagedLowers(snapshots string, layers []string) (usr, rest []string) {
	for _, l := range layers {
		rel, err := filepath.Rel(snapshots, l)
		if err != nil || strings.HasPrefix(rel, "..") {
			rel = l // not under snapshots: cannot happen with a Builder's layers
		}
		usr = append(usr, filepath.Join("L", rel, "usr"))
		rest = append(rest, filepath.Join("L", rel))
	}
	return usr, rest
}

// stagePath is a path of the staging directory, as bwrap sees it.
func stagePath(name string) string { return filepath.Join(stagingDir, name) }

// bwrapArgs is the sandbox's bwrap command: every namespace unshared but the network
// namespace of an egress sandbox (the one unshare made and the setup step prepared) or
// the host's network; as the sandbox user (1000) of the id slot's user namespace as
// root, of a user namespace of bwrap's own otherwise.
func (r *Runtime) bwrapArgs(info record) []string {
	args := []string{r.bwrap}
	if info.IDs != nil {
		args = append(args, "--userns", userNSArg)
	} else {
		args = append(args, "--unshare-user")
	}
	args = append(args, "--uid", sandboxUID, "--gid", sandboxUID,
		"--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try")
	if info.BlockNetwork && netPrepMode(info) == "" {
		args = append(args, "--unshare-net")
	}
	args = append(args, "--die-with-parent", "--new-session", "--as-pid-1", "--hostname", "sandbox",
		"--cap-drop", "ALL", "--tmpfs", "/")
	for _, top := range TopDirs() {
		src := stagePath(filepath.Join("rest", top))
		if top == "usr" {
			src = stagePath("usr")
		}
		args = append(args, "--bind", src, "/"+top)
	}
	args = append(args, rootLinkArgs(hostRootLinks(r.b.hostRoot))...)
	args = append(args, "--bind", stagePath("ws"), "/workspace", "--bind", stagePath("tmp"), "/tmp")
	args = append(args, volumeArgs(info.Volumes)...)
	args = append(args, scratchMounts(shmSizeMB(info.Limits), 0)...)
	args = append(args, procMaskArgs()...)
	args = append(args, "--ro-bind", stagePath("init"), initPath)
	args = append(args, egressArgs(info)...)
	args = append(args, "--remount-ro", "/", "--clearenv", "--setenv", initEnv, "1")
	if info.Egress != nil && info.Egress.Helper != "" {
		args = append(args, "--setenv", egressEnv, "1")
	}
	args = append(args, "--chdir", "/", "--")
	if r.initArgv != nil {
		return append(args, r.initArgv...)
	}
	return append(args, initPath)
}

// rootLinkArgs are the bwrap arguments of /bin, /lib, ...: the host's symlinks into usr,
// or read-only binds of the host's directories.
func rootLinkArgs(links []rootLink) []string {
	var args []string
	for _, l := range links {
		if l.target != "" {
			args = append(args, "--symlink", l.target, "/"+l.name)
		} else {
			args = append(args, "--ro-bind", "/"+l.name, "/"+l.name)
		}
	}
	return args
}

// Scratch space. A tmpfs holds its files in host memory, charged to the sandbox's memory
// cgroup when it has a memory limit: a command that fills one can push the sandbox to
// its memory limit, where the OOM killer may pick any process of the sandbox, the init
// among them (a tmpfs's pages belong to no process, so they do not make the filler the
// largest). So:
//
//   - /tmp of a sandbox is on its disk: data/tmp, emptied whenever a keeper starts (so
//     it lasts until the sandbox stops, as a tmpfs did), counted against the disk cap,
//     never against memory. Filling it is ENOSPC (or EFBIG), the disk limit.
//   - /dev/shm is a tmpfs of devShmMB (64 MiB, as Docker gives a container), for POSIX
//     shared memory and semaphores (Python's multiprocessing, for one), but never more
//     than a quarter of the sandbox's memory limit, so that filling it is ENOSPC well
//     before the memory limit.
//   - a build's /tmp stays a tmpfs (builds have no memory limit) of the build's disk
//     limit, at most tmpMaxMB (1 GiB).
const (
	tmpMaxMB = 1024
	devShmMB = 64
)

// tmpSizeMB is the size of a build's /tmp, in MiB, for a disk cap of diskMB (0: none).
func tmpSizeMB(diskMB int64) int64 {
	if diskMB > 0 && diskMB < tmpMaxMB {
		return diskMB
	}
	return tmpMaxMB
}

// shmSizeMB is the size of /dev/shm, in MiB, under limits lim.
func shmSizeMB(lim sandbox.Limits) int64 {
	if lim.MemoryMB > 0 {
		return max(1, min(devShmMB, lim.MemoryMB/4))
	}
	return devShmMB
}

// scratchMounts are the bwrap arguments of /proc, /dev, /dev/shm and, when tmpMB is not
// 0, a tmpfs /tmp: the same for a sandbox and a build. /dev is bwrap's minimal one,
// read-only once /dev/shm is mounted in it, so that nothing can be created there (a file
// in its tmpfs would be host memory outside every limit); the device nodes, /dev/pts and
// /dev/shm are mounts of their own and stay writable. /tmp is world-writable and sticky
// as everywhere.
func scratchMounts(shmMB, tmpMB int64) []string {
	args := []string{"--proc", "/proc", "--dev", "/dev",
		"--size", strconv.FormatInt(shmMB<<20, 10), "--perms", "1777", "--tmpfs", "/dev/shm",
		"--remount-ro", "/dev"}
	if tmpMB > 0 {
		args = append(args, "--size", strconv.FormatInt(tmpMB<<20, 10), "--perms", "1777", "--tmpfs", "/tmp")
	}
	return args
}

// ensureSlot gives a sandbox of a root runtime that has no id slot one (and records
// it): a sandbox made by a version of trueforge that ran sandboxes as host root, whose
// files all belong to host root then, since its sandbox user was host root. Those files
// go to the slot's sandbox user, who owned them inside, and the overlays' roots to the
// slot's root.
func (r *Runtime) ensureSlot(ctx context.Context, id string, info *record) error {
	if r.b.ids == nil || info.IDs != nil {
		return nil
	}
	slot, err := r.b.ids.claim(r.dir(id))
	if err != nil {
		return err
	}
	user := func(uid, gid uint32) (uint32, uint32, bool) {
		if uid != 0 && gid != 0 {
			return uid, gid, false
		}
		nu, ng := uid, gid
		if uid == 0 {
			nu = slot.hostUID(sandboxUIDn)
		}
		if gid == 0 {
			ng = slot.hostGID(sandboxUIDn)
		}
		return nu, ng, true
	}
	for _, d := range []string{"upper", "workspace"} {
		if err == nil {
			err = shiftTree(ctx, filepath.Join(r.dataDir(id), d), user)
		}
	}
	for _, d := range []string{"upper", "upper/usr", "upper/rest"} {
		if err == nil {
			err = os.Lchown(filepath.Join(r.dataDir(id), d), int(slot.UID), int(slot.GID))
		}
	}
	if err == nil {
		info.IDs = &slot
		err = writeRecord(r.dir(id), *info)
	}
	if err != nil {
		r.b.ids.release(slot, r.dir(id))
		return fmt.Errorf("give sandbox %s an id slot: %w", id, err)
	}
	return nil
}

// tmpScratch is the sandbox's /tmp on the host.
func (r *Runtime) tmpScratch(id string) string { return filepath.Join(r.dataDir(id), "tmp") }

// resetScratch empties what a keeper starts afresh: the overlay workdirs and /tmp
// (data/tmp, mode 1777, owned by the slot's root).
func (r *Runtime) resetScratch(id string, info record) error {
	for _, d := range []string{filepath.Join("work", "usr"), filepath.Join("work", "rest"), "tmp"} {
		p := filepath.Join(r.dataDir(id), d)
		_ = removeAll(p)
		if err := os.MkdirAll(p, 0o700); err != nil {
			return err
		}
	}
	tmp := r.tmpScratch(id)
	if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil {
		return err
	}
	if info.IDs != nil {
		return os.Lchown(tmp, int(info.IDs.UID), int(info.IDs.GID))
	}
	return nil
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
	return untilNoneLeft(ctx, time.Now().Add(wait), 5*time.Millisecond, func() error {
		left := killPidNS(ns)
		if len(left) == 0 {
			return nil
		}
		return fmt.Errorf("processes of the sandbox still alive %s after SIGKILL: %s", wait, strings.Join(left, ", "))
	})
}
