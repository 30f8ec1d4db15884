//go:build linux

package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Resource limits (sandbox.Limits) are enforced per sandbox, on its keeper and so on
// everything that runs in it, by the first of these that works on the host:
//
//   - cgroup v2 (a pure v2 host, when the runtime may write /sys/fs/cgroup: as root):
//     <root cgroup>/trueforge-<hash of the runtime root>/<sandbox id> with memory.max,
//     memory.swap.max=0, pids.max and cpu.max; cgroup.kill on stop.
//   - cgroup v1 (legacy and hybrid hosts, such as the CI machines): one cgroup per
//     sandbox under the runtime's own cgroup in each of the memory, pids and cpu
//     hierarchies: memory.limit_in_bytes and memory.memsw.limit_in_bytes (no swap),
//     pids.max, cpu.cfs_quota_us over a 100 ms period.
//   - rlimits (no writable cgroup, e.g. an unprivileged user without delegation): each
//     command runs under prlimit with RLIMIT_AS for MemoryMB, the keeper sets
//     RLIMIT_NPROC for Pids on itself between creating the outer user namespace and the
//     sandbox's (so that it counts the sandbox's processes, not all of the host user's),
//     and RLIMIT_FSIZE for DiskMB (a cap on each file, not on the total). A CPU limit cannot be enforced
//     this way and is refused, and so is a Pids limit on a runtime running as root: the
//     kernel does not apply RLIMIT_NPROC to (host) uid 0, which the sandbox's user is
//     then (see pidsUnenforced).
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

type limiter struct {
	mode      string
	parent    map[string]string // controller ("" for v2) -> directory holding sandbox cgroups
	diskImage bool              // DiskMB is an ext4 image (root)
	prlimit   string
	root      bool // the runtime runs as root: the sandbox's user is host uid 0
}

var cgroupV1Controllers = []string{"memory", "pids", "cpu"}

// newLimiter picks how limits are enforced for a runtime on root.
func newLimiter(root string) *limiter {
	sum := sha256.Sum256([]byte(root))
	name := "trueforge-" + hex.EncodeToString(sum[:6])
	asRoot := os.Geteuid() == 0
	l := &limiter{mode: limitRlimit, diskImage: asRoot, root: asRoot}
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
	const base = "/sys/fs/cgroup"
	if _, err := os.Stat(filepath.Join(base, "cgroup.controllers")); err == nil {
		dir := filepath.Join(base, name)
		if enableV2(base, dir) == nil {
			l.mode, l.parent = limitCgroup2, map[string]string{"": dir}
		}
		return l
	}
	own := ownCgroups()
	parents := map[string]string{}
	for _, c := range cgroupV1Controllers {
		mnt := filepath.Join(base, c)
		if _, err := os.Stat(filepath.Join(mnt, "cgroup.procs")); err != nil {
			return l
		}
		// Writable? (The directory itself is made when a limited sandbox needs it.)
		if syscall.Access(filepath.Join(mnt, own[c]), 2) != nil {
			return l
		}
		parents[c] = filepath.Join(mnt, own[c], name)
	}
	l.mode, l.parent = limitCgroup1, parents
	return l
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

// ownCgroups maps each v1 controller to this process's cgroup path in it.
func ownCgroups() map[string]string {
	out := map[string]string{}
	data, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(data), "\n") {
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

// check refuses limits that are invalid or cannot be enforced here.
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
	if l.mode == limitRlimit {
		if lim.CPU > 0 {
			return errors.New("limits.cpu cannot be enforced on this host: no writable cgroup (run as root, or leave cpu at 0)")
		}
		if (lim.MemoryMB > 0 || lim.Pids > 0 || lim.DiskMB > 0) && l.prlimit == "" {
			return errors.New("limits cannot be enforced on this host: no writable cgroup and no prlimit (install util-linux, or leave memory_mb, pids and disk_mb at 0)")
		}
	}
	return l.pidsUnenforced(lim)
}

// pidsUnenforced refuses a Pids limit that the rlimit mode would only pretend to
// enforce: RLIMIT_NPROC is not checked for processes of the host's uid 0 (fork allows
// root past it), and a root runtime's sandbox user is host uid 0. It is checked at
// Create and again at every keeper start, since a sandbox made while cgroups were
// writable may start on a runtime that has lost them.
func (l *limiter) pidsUnenforced(lim sandbox.Limits) error {
	if l.mode != limitRlimit || !l.root || lim.Pids <= 0 {
		return nil
	}
	return fmt.Errorf("limits.pids (%d) cannot be enforced on this host: the runtime runs as root and found no writable cgroup, "+
		"and RLIMIT_NPROC, the fallback, does not apply to root (the sandbox's processes are host uid 0); "+
		"give the runtime a writable cgroup (the cgroup v2 hierarchy, or the memory, pids and cpu hierarchies of cgroup v1), "+
		"run it as a non-root user, or leave pids at 0", lim.Pids)
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
	if err := l.pidsUnenforced(lim); err != nil {
		return none, err
	}
	if l.mode == limitRlimit {
		// Set by the keeper script (scriptLimits), not here: RLIMIT_NPROC is counted per
		// user namespace and checked against the limit each namespace's creator had, so
		// it must be set after the outer namespace exists and before bwrap makes the
		// sandbox's. Set before, it would count every process of the host user.
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
	deadline := time.Now().Add(wait)
	for {
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
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes still in the cgroups of sandbox %s after SIGKILL", left, id)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
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

// scriptLimits are the keeper script's lines that set rlimits on itself (and so on the
// whole sandbox) in rlimit mode.
func (l *limiter) scriptLimits(lim sandbox.Limits) string {
	if l.mode != limitRlimit || l.prlimit == "" {
		return ""
	}
	var opts []string
	if lim.Pids > 0 {
		opts = append(opts, "--nproc="+strconv.FormatInt(lim.Pids, 10))
	}
	if lim.DiskMB > 0 && !l.diskImage {
		opts = append(opts, "--fsize="+strconv.FormatInt(lim.DiskMB<<20, 10))
	}
	if len(opts) == 0 {
		return ""
	}
	return shq(l.prlimit) + " --pid $$ " + strings.Join(opts, " ") + "\n"
}

// wrap runs a command under the rlimits that cannot be set on the keeper.
func (l *limiter) wrap(argv []string, lim sandbox.Limits) []string {
	if l.mode != limitRlimit || lim.MemoryMB <= 0 || l.prlimit == "" {
		return argv
	}
	return append([]string{l.prlimit, "--as=" + strconv.FormatInt(lim.MemoryMB<<20, 10), "--"}, argv...)
}
