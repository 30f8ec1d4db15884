//go:build linux

package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Resource limits (sandbox.Limits) are enforced per sandbox, on its keeper and so on
// everything that runs in it, by the first of these that works on the host:
//
//   - cgroup v2 (a pure v2 host), as root: <root cgroup>/trueforge-<hash of the runtime
//     root>/<sandbox id> with memory.max, memory.swap.max=0, pids.max and cpu.max;
//     cgroup.kill on stop.
//   - cgroup v2, delegated (a user without root whose own cgroup, from /proc/self/cgroup,
//     is writable and offers the memory, pids and cpu controllers: a systemd unit with
//     Delegate=yes, such as `systemd-run --user --scope -p Delegate=yes ...` or the
//     user's own user@.service tree): the same files in <own cgroup>/trueforge-<hash>/<id>.
//     The v2 rule "no internal processes" forbids enabling controllers for the children
//     of a cgroup that has processes of its own, and the runtime's process is one of them,
//     so, as rootless Podman does, the processes of the own cgroup are first moved into a
//     leaf child, <own cgroup>/trueforge-leaf, and the controllers enabled in the own
//     cgroup's subtree_control. A runtime started later from a process already moved
//     (its cgroup is that leaf) uses the leaf's parent the same way. A sibling of the own
//     cgroup is not used: the parent is the service manager's (systemd's), not ours.
//   - cgroup v1 (legacy and hybrid hosts, such as the CI machines): one cgroup per
//     sandbox under the runtime's own cgroup in each of the memory, pids and cpu
//     hierarchies: memory.limit_in_bytes and memory.memsw.limit_in_bytes (no swap),
//     pids.max, cpu.cfs_quota_us over a 100 ms period. Nothing is delegated on v1, so
//     this is for root.
//   - rlimits (no writable cgroup, e.g. an unprivileged user without delegation): each
//     command runs under prlimit with RLIMIT_AS for MemoryMB (a cap on each process's
//     address space, not on the sandbox's total), the setup step sets RLIMIT_NPROC for
//     Pids on itself between making the outer user namespaces and the sandbox's (so that
//     it counts the sandbox's processes, not all of the host user's; setupRlimits), and
//     RLIMIT_FSIZE for DiskMB (a cap on each file, not on the total). A CPU limit cannot
//     be enforced this way. As rootless container engines do, the sandbox runs with the
//     limits that can be enforced, and UnenforcedLimits says which are not, and why (the
//     harness records it on the sandbox's event, the provider warns at plan time); with
//     RequireLimits (SetRequireLimits) Create refuses instead. RLIMIT_NPROC binds a root
//     runtime's sandboxes as well: their processes are an id slot's uids, not host uid 0
//     (whom the kernel exempts).
//
// TRUEFORGE_LOCAL_LIMITS=rlimit (limitsModeEnv) forces the rlimit mode, as if no cgroup
// were writable: a test and diagnostic override, so that the unenforced path can be
// exercised on a host where the runtime has cgroups.
//
// Disk (DiskMB) as root: the sandbox's data/ (overlay upper directories and workspace) is
// an ext4 image of that size, loop-mounted on the host, so a full disk is ENOSPC inside
// the sandbox and nothing else fills up. Unprivileged: RLIMIT_FSIZE, as above.
//
// Hitting a limit is reported on the command that was running (ExecResult.Limit): memory
// when the cgroup's oom_kill count rose during the command, pids when its pids.events max
// count rose, disk when the image is full or a file hit RLIMIT_FSIZE. Limits are per
// sandbox, so a command can be blamed for a limit another concurrent command of the same
// sandbox hit.

// Limit modes.
const (
	limitCgroup2 = "cgroup2"
	limitCgroup1 = "cgroup1"
	limitRlimit  = "rlimit"
)

// limitsModeEnv, set to "rlimit", makes the runtimes and ProbeLimits of this process use
// the rlimit mode whatever the host offers. A test and diagnostic override only.
const limitsModeEnv = "TRUEFORGE_LOCAL_LIMITS"

// cgroupLeaf is the child of a delegated cgroup that its own processes are moved into.
const cgroupLeaf = "trueforge-leaf"

type limiter struct {
	mode      string
	parent    map[string]string // controller ("" for v2) -> directory holding sandbox cgroups
	diskImage bool              // DiskMB is an ext4 image (root)
	prlimit   string
	root      bool // the runtime runs as root: the sandbox's user is host uid 0
	uid       int  // the runtime's effective uid
	// why says, in the rlimit mode, why no cgroup is used ("no writable cgroup: ...").
	why string
	// require refuses limits that would not be enforced (Runtime.SetRequireLimits).
	require atomic.Bool
}

var cgroupV1Controllers = []string{"memory", "pids", "cpu"}

// cgroupHost is what picking a limit mode reads: the cgroup mount, this process's
// cgroups and who it runs as. Tests point it at a fake tree.
type cgroupHost struct {
	base     string // where the cgroup file systems are mounted: /sys/fs/cgroup
	self     string // this process's cgroups: the content of /proc/self/cgroup
	euid     int
	override string // limitsModeEnv's value
	// writable reports whether this process may write path (access(2) with W_OK).
	writable func(path string) bool
}

func thisHost() cgroupHost {
	self, _ := os.ReadFile("/proc/self/cgroup")
	return cgroupHost{
		base: "/sys/fs/cgroup", self: string(self), euid: os.Geteuid(), override: os.Getenv(limitsModeEnv),
		writable: func(p string) bool { return syscall.Access(p, 2) == nil },
	}
}

// newLimiter picks how limits are enforced for a runtime on root, and sets up the
// cgroups that the mode needs before any sandbox (the parent with its controllers).
func newLimiter(root string) *limiter {
	return detectLimiter(thisHost(), runtimeCgroupName(root), true)
}

func runtimeCgroupName(root string) string {
	sum := sha256.Sum256([]byte(root))
	return "trueforge-" + hex.EncodeToString(sum[:6])
}

// detectLimiter picks the limit mode on h. With setup, it also makes the cgroups the
// mode needs (and moves this process into a leaf of a delegated cgroup); without, it
// changes nothing and answers what a runtime would most likely get (ProbeLimits).
func detectLimiter(h cgroupHost, name string, setup bool) *limiter {
	asRoot := h.euid == 0
	l := &limiter{mode: limitRlimit, diskImage: asRoot, root: asRoot, uid: h.euid}
	if p, err := findTool("prlimit"); err == nil {
		l.prlimit = p
	}
	if l.diskImage {
		for _, t := range []string{"mkfs.ext4", "mount", "umount"} {
			if _, err := findTool(t); err != nil {
				l.diskImage = false
			}
		}
	}
	if h.override == limitRlimit {
		l.why = "no writable cgroup: " + limitsModeEnv + "=rlimit turned cgroups off (a test and diagnostic override)"
		return l
	}
	if _, err := os.Stat(filepath.Join(h.base, "cgroup.controllers")); err == nil {
		l.useV2(h, name, setup)
		return l
	}
	l.useV1(h, name)
	return l
}

// useV1 uses the runtime's own cgroup in each v1 hierarchy when all are writable.
func (l *limiter) useV1(h cgroupHost, name string) {
	own := ownCgroups(h.self)
	parents := map[string]string{}
	for _, c := range cgroupV1Controllers {
		mnt := filepath.Join(h.base, c)
		if _, err := os.Stat(filepath.Join(mnt, "cgroup.procs")); err != nil {
			l.why = fmt.Sprintf("no writable cgroup: the %s hierarchy of cgroup v1 is not mounted at %s", c, mnt)
			return
		}
		// Writable? (The directory itself is made when a limited sandbox needs it.)
		if !h.writable(filepath.Join(mnt, own[c])) {
			if h.euid != 0 {
				l.why = fmt.Sprintf("no writable cgroup: running as uid %d on a cgroup v1 host, whose hierarchies only root may write "+
					"(cgroups are delegated to users on cgroup v2 only)", h.euid)
			} else {
				l.why = fmt.Sprintf("no writable cgroup: %s is not writable (a read-only cgroup mount, as in a container?)", filepath.Join(mnt, own[c]))
			}
			return
		}
		parents[c] = filepath.Join(mnt, own[c], name)
	}
	l.mode, l.parent = limitCgroup1, parents
}

// useV2 uses, as root, the root of the v2 hierarchy, else this process's own cgroup
// when it is delegated (writable, with the memory, pids and cpu controllers).
func (l *limiter) useV2(h cgroupHost, name string, setup bool) {
	var rootErr error
	if h.euid == 0 {
		dir := filepath.Join(h.base, name)
		if setup {
			rootErr = enableV2(h.base, dir)
		} else if !h.writable(filepath.Join(h.base, "cgroup.subtree_control")) {
			rootErr = errors.New("not writable")
		}
		if rootErr == nil {
			l.mode, l.parent = limitCgroup2, map[string]string{"": dir}
			return
		}
	}
	own, ok := ownCgroupV2(h.self)
	if !ok {
		l.why = fmt.Sprintf("no writable cgroup: running as uid %d, and /proc/self/cgroup names no cgroup v2 path", h.euid)
		return
	}
	dir := filepath.Join(h.base, own)
	if filepath.Base(own) == cgroupLeaf {
		// Moved into the leaf by an earlier runtime (or started by a process that was).
		dir = filepath.Dir(dir)
	}
	if filepath.Clean(dir) == filepath.Clean(h.base) {
		// The hierarchy's root (a cgroup namespace's, in a container): moving every
		// process of it into a leaf is not this runtime's call to make.
		l.why = fmt.Sprintf("no writable cgroup: running as uid %d in the root cgroup of the v2 hierarchy", h.euid)
		if rootErr != nil {
			l.why += fmt.Sprintf(", whose controllers could not be enabled for trueforge's cgroups (%v)", rootErr)
		}
		return
	}
	if err := checkDelegated(h, dir); err != nil {
		l.why = fmt.Sprintf("no writable cgroup: running as uid %d without a delegated cgroup v2 subtree (%v)", h.euid, err)
		return
	}
	parent := filepath.Join(dir, name)
	if setup {
		if err := delegate(dir, parent); err != nil {
			l.why = fmt.Sprintf("no writable cgroup: running as uid %d, the delegated cgroup %s could not be set up for sandboxes (%v)", h.euid, dir, err)
			return
		}
	}
	l.mode, l.parent = limitCgroup2, map[string]string{"": parent}
}

// checkDelegated says why the v2 cgroup dir cannot hold sandbox cgroups, or nil.
func checkDelegated(h cgroupHost, dir string) error {
	for _, p := range []string{dir, filepath.Join(dir, "cgroup.procs"), filepath.Join(dir, "cgroup.subtree_control")} {
		if !h.writable(p) {
			return fmt.Errorf("its cgroup %s is not writable by it: not delegated", dir)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("its cgroup %s: %w", dir, err)
	}
	have := strings.Fields(string(data))
	var missing []string
	for _, c := range cgroupV1Controllers {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("its cgroup %s is delegated without the %s controller(s) (cgroup.controllers: %q); "+
			"delegate them, for example with Delegate=memory pids cpu on the systemd unit", dir, strings.Join(missing, ", "), strings.TrimSpace(string(data)))
	}
	return nil
}

// delegate prepares the delegated cgroup dir to hold sandbox cgroups under parent: its
// processes move into the leaf child (no internal processes: a cgroup that has some
// cannot enable controllers for its children), then the memory, pids and cpu
// controllers are enabled in dir and in parent.
func delegate(dir, parent string) error {
	const ctl = "+memory +pids +cpu"
	leaf := filepath.Join(dir, cgroupLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	var err error
	// A process may fork into dir while the others move: move it too and try again.
	for range 5 {
		if err = moveProcs(dir, leaf); err != nil {
			return err
		}
		if err = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(ctl), 0); !errors.Is(err, syscall.EBUSY) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("enable controllers in %s: %w", dir, err)
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(ctl), 0)
}

// moveProcs moves every process of cgroup from into cgroup to.
func moveProcs(from, to string) error {
	data, err := os.ReadFile(filepath.Join(from, "cgroup.procs"))
	if err != nil {
		return err
	}
	for _, f := range strings.Fields(string(data)) {
		err := os.WriteFile(filepath.Join(to, "cgroup.procs"), []byte(f), 0)
		if err != nil && !errors.Is(err, syscall.ESRCH) { // ESRCH: it exited meanwhile
			return fmt.Errorf("move process %s into %s: %w", f, to, err)
		}
	}
	return nil
}

// ownCgroupV2 is this process's cgroup v2 path ("0::/user.slice/...").
func ownCgroupV2(self string) (string, bool) {
	for _, line := range strings.Split(self, "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok && strings.HasPrefix(rest, "/") {
			return rest, true
		}
	}
	return "", false
}

// removeParents removes the runtime's cgroup directories if no sandbox uses them.
func (l *limiter) removeParents() {
	for _, p := range l.parent {
		_ = os.Remove(p)
	}
}

// enableV2 makes dir a cgroup under base with the memory, pids and cpu controllers
// available to its children.
func enableV2(base, dir string) error {
	const ctl = "+memory +pids +cpu"
	if err := os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte(ctl), 0); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(ctl), 0)
}

// ownCgroups maps each v1 controller to this process's cgroup path in it, from the
// content of /proc/self/cgroup.
func ownCgroups(self string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(self, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			out[c] = f[2]
		}
	}
	return out
}

// check refuses limits that are invalid, and, with require, limits that would not be
// enforced here (UnenforcedLimits).
func (l *limiter) check(lim sandbox.Limits) error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"cpu", lim.CPU}, {"memory_mb", lim.MemoryMB}, {"pids", lim.Pids}, {"disk_mb", lim.DiskMB}} {
		if f.v < 0 {
			return fmt.Errorf("limits.%s is %d: must be 0 (no limit) or positive", f.name, f.v)
		}
	}
	if lim.MemoryMB > 0 && lim.MemoryMB < 16 {
		return fmt.Errorf("limits.memory_mb is %d: at least 16 MiB are needed to run the sandbox", lim.MemoryMB)
	}
	if lim.Pids > 0 && lim.Pids < 8 {
		return fmt.Errorf("limits.pids is %d: at least 8 are needed to run the sandbox", lim.Pids)
	}
	if lim.DiskMB > 0 && lim.DiskMB < 8 && l.diskImage {
		return fmt.Errorf("limits.disk_mb is %d: the smallest disk is 8 MiB", lim.DiskMB)
	}
	if l.require.Load() {
		if u := l.unenforced(lim); len(u) > 0 {
			return &UnenforcedError{Limits: u}
		}
	}
	return nil
}

// unenforced lists the limits of lim that this mode runs a sandbox without, or with
// only in part, and why. pids is never among them: the cgroup or RLIMIT_NPROC (set by
// the setup step, which needs no other program) binds the sandbox's processes, a root
// runtime's too, since they are an id slot's uids (subids.go).
func (l *limiter) unenforced(lim sandbox.Limits) []sandbox.UnenforcedLimit {
	var out []sandbox.UnenforcedLimit
	add := func(name, reason string) {
		out = append(out, sandbox.UnenforcedLimit{Limit: name, Reason: reason})
	}
	why := l.why
	if why == "" {
		why = "no writable cgroup"
	}
	noPrlimit := "; prlimit (util-linux), which sets the fallback rlimits, is not installed"
	if l.mode == limitRlimit {
		if lim.CPU > 0 {
			add("cpu", why+"; no rlimit can share out CPU time, so the sandbox may use every CPU")
		}
		if lim.MemoryMB > 0 {
			if l.prlimit != "" {
				add("memory", fmt.Sprintf("%s; enforced per process only: each command runs under RLIMIT_AS of %d MiB, "+
					"so the sandbox's processes together may use more", why, lim.MemoryMB))
			} else {
				add("memory", why+noPrlimit)
			}
		}
	}
	if lim.DiskMB > 0 && !l.diskImage {
		image := "the sandbox has no disk image of its own: only a root runtime makes one"
		if l.root {
			image = "the sandbox has no disk image of its own: mkfs.ext4 (e2fsprogs) or mount is not installed"
		}
		add("disk", fmt.Sprintf("%s; enforced per file only: RLIMIT_FSIZE caps each file at %d MiB, not the sandbox's total", image, lim.DiskMB))
	}
	return out
}

// UnenforcedError is Create's refusal of limits that would not be enforced, under
// RequireLimits.
type UnenforcedError struct {
	Limits []sandbox.UnenforcedLimit
}

func (e *UnenforcedError) Error() string {
	var names, details []string
	for _, u := range e.Limits {
		names = append(names, u.Limit)
		details = append(details, "limits."+u.Limit+": "+u.Reason)
	}
	return fmt.Sprintf("the sandbox's %s limit(s) cannot be enforced on this host, and limits are required (the sandbox provider's require_limits): %s. "+
		"Run the runtime as root, or as a user with a delegated cgroup v2 subtree (for example under systemd-run --user --scope -p Delegate=yes), "+
		"or set require_limits = false on the sandbox provider to run sandboxes with the limits that can be enforced",
		strings.Join(names, ", "), strings.Join(details, "; "))
}

// SetRequireLimits makes Create refuse a sandbox whose limits would not all be enforced
// (UnenforcedLimits), with an UnenforcedError naming them, instead of running it with
// the limits that can be. Off by default; the harness sets it from the sandbox
// provider's require_limits (RequireLimits).
func (r *Runtime) SetRequireLimits(on bool) { r.limits.require.Store(on) }

// UnenforcedLimits lists the limits of lim that a sandbox of this runtime would run
// without, or with only in part (per process, per file), and why. It implements
// sandbox.LimitReporter.
func (r *Runtime) UnenforcedLimits(lim sandbox.Limits) []sandbox.UnenforcedLimit {
	return r.limits.unenforced(lim)
}

// ProbeLimits answers UnenforcedLimits for a runtime this process would open, without
// opening one or changing anything on the host: for plan-time checks. (A delegated
// cgroup is judged by its files; setting it up may still fail, which the runtime then
// reports.)
func ProbeLimits(lim sandbox.Limits) []sandbox.UnenforcedLimit {
	return detectLimiter(thisHost(), "", false).unenforced(lim)
}

func cgroupLimited(lim sandbox.Limits) bool {
	return lim.CPU > 0 || lim.MemoryMB > 0 || lim.Pids > 0
}

// keeperLimits puts a starting keeper under its sandbox's limits; add is called with
// its pid before it forks anything.
type keeperLimits struct {
	add func(pid int) error
}

// prepare creates (or resets) the sandbox's cgroups with its limits.
func (l *limiter) prepare(id string, lim sandbox.Limits) (keeperLimits, error) {
	none := keeperLimits{add: func(int) error { return nil }}
	if l.mode == limitRlimit {
		// Set by the setup step (setupRlimits), not here: RLIMIT_NPROC is counted per
		// user namespace and checked against the limit each namespace's creator had, so
		// it must be set after the outer namespaces exist and before bwrap makes or
		// joins the sandbox's. Set before, it would count every process of the host user.
		return none, nil
	}
	if !cgroupLimited(lim) {
		return none, nil
	}
	_ = l.remove(id) // a dead keeper's
	files := map[string]map[string]string{}
	if l.mode == limitCgroup2 {
		f := map[string]string{}
		if lim.MemoryMB > 0 {
			f["memory.max"] = strconv.FormatInt(lim.MemoryMB<<20, 10)
			// Not memory.oom.group: the OOM killer would take the sandbox's init with
			// the hog, and every running command with it.
			f["memory.swap.max"] = "0"
		}
		if lim.Pids > 0 {
			f["pids.max"] = strconv.FormatInt(lim.Pids, 10)
		}
		if lim.CPU > 0 {
			f["cpu.max"] = strconv.FormatInt(lim.CPU*100000, 10) + " 100000"
		}
		files[""] = f
	} else {
		files["memory"], files["pids"], files["cpu"] = map[string]string{}, map[string]string{}, map[string]string{}
		if lim.MemoryMB > 0 {
			files["memory"]["memory.limit_in_bytes"] = strconv.FormatInt(lim.MemoryMB<<20, 10)
		}
		if lim.Pids > 0 {
			files["pids"]["pids.max"] = strconv.FormatInt(lim.Pids, 10)
		}
		if lim.CPU > 0 {
			files["cpu"]["cpu.cfs_period_us"] = "100000"
			files["cpu"]["cpu.cfs_quota_us"] = strconv.FormatInt(lim.CPU*100000, 10)
		}
	}
	var dirs []string
	for c, f := range files {
		dir := filepath.Join(l.parent[c], id)
		// The parent may be removed by the last sandbox's remove between MkdirAll's
		// steps; making it again is all a retry needs.
		var err error
		for range 3 {
			if err = os.MkdirAll(dir, 0o755); !errors.Is(err, os.ErrNotExist) {
				break
			}
		}
		if err != nil {
			return none, fmt.Errorf("create cgroup: %w", err)
		}
		dirs = append(dirs, dir)
		for name, v := range f {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0); err != nil {
				return none, fmt.Errorf("cgroup %s: %w", name, err)
			}
		}
		if c == "memory" && lim.MemoryMB > 0 {
			// No swap either; the file exists only with swap accounting.
			_ = os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(lim.MemoryMB<<20, 10)), 0)
		}
	}
	return keeperLimits{add: func(pid int) error {
		for _, d := range dirs {
			if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
				return fmt.Errorf("enter cgroup %s: %w", d, err)
			}
		}
		return nil
	}}, nil
}

// cgroupDirs lists the sandbox's cgroup directories that exist.
func (l *limiter) cgroupDirs(id string) []string {
	var out []string
	for _, p := range l.parent {
		d := filepath.Join(p, id)
		if _, err := os.Stat(d); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// kill kills whatever is in the sandbox's cgroups and removes them.
func (l *limiter) kill(ctx context.Context, id string, wait time.Duration) error {
	dirs := l.cgroupDirs(id)
	if len(dirs) == 0 {
		return nil
	}
	err := untilNoneLeft(ctx, time.Now().Add(wait), 5*time.Millisecond, func() error {
		left := 0
		for _, d := range dirs {
			if l.mode == limitCgroup2 {
				_ = os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0)
			}
			data, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					left++
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if left == 0 {
			return nil
		}
		return fmt.Errorf("%d processes still in the cgroups of sandbox %s after SIGKILL", left, id)
	})
	if err != nil {
		return err
	}
	return l.remove(id)
}

// remove removes the sandbox's (empty) cgroups.
func (l *limiter) remove(id string) error {
	var errs []error
	for _, d := range l.cgroupDirs(id) {
		// An emptied cgroup can take a moment to become removable.
		var err error
		for i := 0; i < 50; i++ {
			if err = os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && l.mode == limitCgroup1 {
		// The runtime's own cgroup directories go with their last sandbox (rmdir fails
		// while another sandbox has one, which is fine); the next limited sandbox makes
		// them again (prepare). Otherwise every runtime root that ever ran a limited
		// sandbox, one per test among them, would leave empty directories in each v1
		// hierarchy. A v2 parent stays: it carries the controllers its children need.
		l.removeParents()
	}
	return errors.Join(errs...)
}

// counters are the limit events of a sandbox so far.
type counters struct {
	oom, pidsMax int64
}

func (l *limiter) events(id string) counters {
	var c counters
	switch l.mode {
	case limitCgroup2:
		d := filepath.Join(l.parent[""], id)
		c.oom = keyedValue(filepath.Join(d, "memory.events"), "oom_kill")
		c.pidsMax = keyedValue(filepath.Join(d, "pids.events"), "max")
	case limitCgroup1:
		c.oom = keyedValue(filepath.Join(l.parent["memory"], id, "memory.oom_control"), "oom_kill")
		c.pidsMax = keyedValue(filepath.Join(l.parent["pids"], id, "pids.events"), "max")
	}
	return c
}

// keyedValue reads "key value" from a cgroup file; 0 when absent.
func keyedValue(path, key string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == key {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}

// hit names the limit a command ran into, or "".
func (l *limiter) hit(id string, before counters, stderr []byte, dataDir string, exitCode int) string {
	after := l.events(id)
	switch {
	case after.oom > before.oom:
		return sandbox.LimitMemory
	case after.pidsMax > before.pidsMax:
		return sandbox.LimitPids
	}
	if l.diskImage {
		var st syscall.Statfs_t
		if syscall.Statfs(dataDir, &st) == nil && st.Blocks > 0 && st.Bavail*uint64(st.Bsize) < 256<<10 &&
			bytes.Contains(stderr, []byte("No space left on device")) {
			return sandbox.LimitDisk
		}
	} else if exitCode == 128+int(syscall.SIGXFSZ) || bytes.Contains(stderr, []byte("File too large")) {
		return sandbox.LimitDisk
	}
	return ""
}

// setupRlimits are the rlimits that the setup step (setup.go) sets on itself just before
// it execs bwrap, and so on the whole sandbox: RLIMIT_NPROC for Pids in the rlimit mode,
// and RLIMIT_FSIZE for DiskMB without a disk image, in every mode. RLIMIT_NPROC is counted per
// user namespace and uid, and checked, level by level up the namespaces, against the
// limit each namespace's creator had: so it is set after the user namespaces the setup
// step makes (whose creator must not carry it: host root's or the user's processes would
// count against it) and before bwrap makes or joins the sandbox's.
func (l *limiter) setupRlimits(lim sandbox.Limits) []rlimitSetting {
	var out []rlimitSetting
	if lim.Pids > 0 && l.mode == limitRlimit {
		out = append(out, rlimitSetting{Resource: unix.RLIMIT_NPROC, Value: uint64(lim.Pids)})
	}
	// Without a disk image, each file is capped whatever enforces the other limits.
	if lim.DiskMB > 0 && !l.diskImage {
		out = append(out, rlimitSetting{Resource: syscall.RLIMIT_FSIZE, Value: uint64(lim.DiskMB) << 20})
	}
	return out
}

// wrap runs a command under the rlimits that cannot be set on the keeper.
func (l *limiter) wrap(argv []string, lim sandbox.Limits) []string {
	if l.mode != limitRlimit || lim.MemoryMB <= 0 || l.prlimit == "" {
		return argv
	}
	return append([]string{l.prlimit, "--as=" + strconv.FormatInt(lim.MemoryMB<<20, 10), "--"}, argv...)
}
