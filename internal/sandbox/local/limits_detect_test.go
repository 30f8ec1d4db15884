//go:build linux

package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// The choice of a limit mode is tested on fake cgroup trees (plain directories and
// files), since a host has one real tree: this one is cgroup v1 (hybrid), and the
// delegated cgroup v2 subtree of a user session cannot be made here.

const userScope = "/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope"

// fakeV2 makes a cgroup v2 tree under a temp dir with the cgroup dir own holding pids and
// offering controllers, and returns its base.
func fakeV2(t *testing.T, own, controllers string, pids ...string) string {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, own)
	for _, f := range []struct{ path, data string }{
		{filepath.Join(base, "cgroup.controllers"), "cpuset cpu io memory hugetlb pids rdma misc"},
		{filepath.Join(base, "cgroup.subtree_control"), ""},
		{filepath.Join(dir, "cgroup.controllers"), controllers},
		{filepath.Join(dir, "cgroup.subtree_control"), ""},
		{filepath.Join(dir, "cgroup.procs"), strings.Join(pids, "\n")},
		// The leaf's procs file exists, as a kernel's would once the leaf is made.
		{filepath.Join(dir, cgroupLeaf, "cgroup.procs"), ""},
	} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, []byte(f.data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

// fakeHost is a host whose cgroups are under base; writable says which paths this
// process may write (access(2) ignores modes for root, so modes cannot say it).
func fakeHost(base string, euid int, self string, writable func(string) bool) cgroupHost {
	return cgroupHost{base: base, self: self, euid: euid, writable: writable}
}

func under(dir string) func(string) bool {
	return func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func TestCgroupDelegatedV2(t *testing.T) {
	base := fakeV2(t, userScope, "cpu io memory pids", "4242", "4243")
	dir := filepath.Join(base, userScope)
	h := fakeHost(base, 1000, "0::"+userScope+"\n", under(dir))

	// A probe picks the delegated cgroup and touches nothing.
	if l := detectLimiter(h, "", false); l.mode != limitCgroup2 || l.why != "" {
		t.Fatalf("probe: mode %s (%s), want cgroup2", l.mode, l.why)
	}
	if got := readFile(t, filepath.Join(dir, "cgroup.subtree_control")); got != "" {
		t.Fatalf("a probe enabled controllers: %q", got)
	}

	l := detectLimiter(h, "trueforge-abc", true)
	if l.mode != limitCgroup2 || l.parent[""] != filepath.Join(dir, "trueforge-abc") {
		t.Fatalf("mode %s parent %v (%s), want cgroup2 under %s", l.mode, l.parent, l.why, dir)
	}
	// No internal processes: the cgroup's own processes went into the leaf (the fake
	// procs file keeps the last one written) before its controllers were enabled.
	if got := readFile(t, filepath.Join(dir, cgroupLeaf, "cgroup.procs")); got != "4243" {
		t.Fatalf("leaf cgroup.procs = %q, want the moved processes", got)
	}
	for _, d := range []string{dir, l.parent[""]} {
		if got := readFile(t, filepath.Join(d, "cgroup.subtree_control")); got != "+memory +pids +cpu" {
			t.Fatalf("%s/cgroup.subtree_control = %q", d, got)
		}
	}
	if u := l.unenforced(sandbox.Limits{CPU: 1, MemoryMB: 1024, Pids: 64}); len(u) != 0 {
		t.Fatalf("delegated cgroup v2 leaves %v unenforced", u)
	}

	// A runtime started later by a process already moved into the leaf uses the same
	// delegated cgroup, not a cgroup nested in the leaf.
	h.self = "0::" + userScope + "/" + cgroupLeaf + "\n"
	if l := detectLimiter(h, "trueforge-abc", true); l.mode != limitCgroup2 || l.parent[""] != filepath.Join(dir, "trueforge-abc") {
		t.Fatalf("from the leaf: mode %s parent %v (%s)", l.mode, l.parent, l.why)
	}
}

func TestCgroupV2NotDelegated(t *testing.T) {
	for _, c := range []struct {
		name        string
		controllers string
		writable    bool
		self        string
		want        []string
	}{
		{"session scope", "cpu memory pids", false, "0::" + userScope,
			[]string{"uid 1000", "without a delegated cgroup v2 subtree", "not writable", userScope}},
		{"no cpu controller", "memory pids", true, "0::" + userScope,
			[]string{"uid 1000", "without the cpu controller", "Delegate="}},
		{"hierarchy root", "cpu memory pids", true, "0::/",
			[]string{"uid 1000", "root cgroup"}},
		{"no v2 path", "cpu memory pids", true, "1:name=systemd:/x",
			[]string{"uid 1000", "no cgroup v2 path"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := fakeV2(t, userScope, c.controllers, "4242")
			h := fakeHost(base, 1000, c.self, func(string) bool { return c.writable })
			l := detectLimiter(h, "trueforge-abc", true)
			if l.mode != limitRlimit {
				t.Fatalf("mode %s, want rlimit", l.mode)
			}
			for _, w := range c.want {
				if !strings.Contains(l.why, w) {
					t.Errorf("why %q does not mention %q", l.why, w)
				}
			}
			if _, err := os.Stat(filepath.Join(base, userScope, "trueforge-abc")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a cgroup was made in a cgroup that is not usable: %v", err)
			}
		})
	}
}

func TestCgroupV2AsRoot(t *testing.T) {
	base := fakeV2(t, "/system.slice/x.service", "cpu memory pids")
	h := fakeHost(base, 0, "0::/system.slice/x.service", func(string) bool { return true })
	l := detectLimiter(h, "trueforge-abc", true)
	if l.mode != limitCgroup2 || l.parent[""] != filepath.Join(base, "trueforge-abc") {
		t.Fatalf("root: mode %s parent %v, want cgroup2 at the hierarchy's root", l.mode, l.parent)
	}
	if got := readFile(t, filepath.Join(base, "cgroup.subtree_control")); got != "+memory +pids +cpu" {
		t.Fatalf("root cgroup.subtree_control = %q", got)
	}
}

func TestCgroupV1Unprivileged(t *testing.T) {
	base := t.TempDir()
	for _, c := range cgroupV1Controllers {
		if err := os.MkdirAll(filepath.Join(base, c, "user.slice"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(base, c, "cgroup.procs"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	self := "7:memory:/user.slice\n6:pids:/user.slice\n5:cpu,cpuacct:/user.slice\n0::/user.slice\n"
	l := detectLimiter(fakeHost(base, 999, self, func(string) bool { return false }), "trueforge-abc", true)
	if l.mode != limitRlimit || !strings.Contains(l.why, "uid 999") || !strings.Contains(l.why, "cgroup v1") {
		t.Fatalf("mode %s why %q, want rlimit naming uid 999 and cgroup v1", l.mode, l.why)
	}
	// Root may write them: cgroup v1 under its own cgroups.
	l = detectLimiter(fakeHost(base, 0, self, func(string) bool { return true }), "trueforge-abc", true)
	if l.mode != limitCgroup1 || l.parent["cpu"] != filepath.Join(base, "cpu", "user.slice", "trueforge-abc") {
		t.Fatalf("root on v1: mode %s parents %v", l.mode, l.parent)
	}
}

func TestCgroupOverride(t *testing.T) {
	base := fakeV2(t, userScope, "cpu memory pids")
	h := fakeHost(base, 0, "0::"+userScope, func(string) bool { return true })
	h.override = limitRlimit
	if l := detectLimiter(h, "trueforge-abc", true); l.mode != limitRlimit || !strings.Contains(l.why, limitsModeEnv+"=rlimit") {
		t.Fatalf("override: mode %s why %q", l.mode, l.why)
	}
}

// What each mode leaves unenforced, and what RequireLimits makes of it.
func TestUnenforcedLimits(t *testing.T) {
	const why = "no writable cgroup: running as uid 999 on a cgroup v1 host"
	demo := sandbox.Limits{CPU: 1, MemoryMB: 1024, DiskMB: 3072} // the quickstart's default environment
	for _, c := range []struct {
		name string
		l    *limiter
		lim  sandbox.Limits
		want map[string][]string // limit -> fragments of its reason
	}{
		{"user, rlimits", &limiter{mode: limitRlimit, prlimit: "/usr/bin/prlimit", uid: 999, why: why}, demo, map[string][]string{
			"cpu":    {why, "CPU time"},
			"memory": {why, "per process only", "RLIMIT_AS of 1024 MiB"},
			"disk":   {"only a root runtime", "per file only", "RLIMIT_FSIZE", "3072 MiB"},
		}},
		{"user, rlimits, pids enforced", &limiter{mode: limitRlimit, prlimit: "/usr/bin/prlimit", uid: 999, why: why},
			sandbox.Limits{Pids: 64}, map[string][]string{}},
		// pids and disk need no prlimit: the setup step sets their rlimits itself.
		{"user, no prlimit", &limiter{mode: limitRlimit, uid: 999, why: why}, sandbox.Limits{CPU: 1, MemoryMB: 64, Pids: 64, DiskMB: 64}, map[string][]string{
			"cpu": {why}, "memory": {"prlimit"}, "disk": {"per file only"},
		}},
		{"root, rlimits, disk image", &limiter{mode: limitRlimit, prlimit: "/usr/bin/prlimit", root: true, diskImage: true, why: why}, demo, map[string][]string{
			"cpu": {why}, "memory": {"per process only"},
		}},
		{"root, cgroups, no mkfs.ext4", &limiter{mode: limitCgroup1, root: true}, demo, map[string][]string{
			"disk": {"mkfs.ext4"},
		}},
		{"user, delegated cgroup v2", &limiter{mode: limitCgroup2, prlimit: "/usr/bin/prlimit", uid: 1000}, demo, map[string][]string{
			"disk": {"only a root runtime", "per file only"},
		}},
		{"root, cgroups, disk image", &limiter{mode: limitCgroup1, root: true, diskImage: true}, demo, map[string][]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := map[string]string{}
			for _, u := range c.l.unenforced(c.lim) {
				got[u.Limit] = u.Reason
			}
			if len(got) != len(c.want) {
				t.Fatalf("unenforced %v, want %d: %v", got, len(c.want), c.want)
			}
			for name, frags := range c.want {
				for _, f := range frags {
					if !strings.Contains(got[name], f) {
						t.Errorf("%s: reason %q does not mention %q", name, got[name], f)
					}
				}
			}
			// Lenient by default: accepted. Required: refused, naming every limit.
			if err := c.l.check(c.lim); err != nil {
				t.Fatalf("check without RequireLimits: %v", err)
			}
			c.l.require.Store(true)
			err := c.l.check(c.lim)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("check with RequireLimits, everything enforced: %v", err)
				}
				return
			}
			var ue *UnenforcedError
			if !errors.As(err, &ue) {
				t.Fatalf("check with RequireLimits: %v, want an UnenforcedError", err)
			}
			for name := range c.want {
				if !strings.Contains(err.Error(), "limits."+name+": ") {
					t.Errorf("error %q does not name limits.%s", err, name)
				}
			}
			for _, f := range []string{"require_limits", "root", "delegated cgroup v2", "require_limits = false"} {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("error %q does not mention %q", err, f)
				}
			}
		})
	}
}

// pids is enforced in every mode, a root runtime's on rlimits too (its sandboxes are an
// id slot's uids, which RLIMIT_NPROC binds): never reported as unenforced, and
// RequireLimits accepts it.
func TestUnenforcedLimitsRootPids(t *testing.T) {
	l := &limiter{mode: limitRlimit, root: true}
	if u := l.unenforced(sandbox.Limits{Pids: 64}); len(u) != 0 {
		t.Fatalf("pids reported as unenforced: %v", u)
	}
	l.require.Store(true)
	if err := l.check(sandbox.Limits{Pids: 64}); err != nil {
		t.Fatalf("check with RequireLimits: %v", err)
	}
}

// The setup step's rlimits: RLIMIT_NPROC only where no cgroup counts processes,
// RLIMIT_FSIZE wherever there is no disk image, whatever enforces the rest.
func TestSetupRlimits(t *testing.T) {
	lim := sandbox.Limits{Pids: 64, DiskMB: 16}
	for _, c := range []struct {
		name string
		l    *limiter
		want map[int]uint64
	}{
		{"rlimits", &limiter{mode: limitRlimit}, map[int]uint64{unix.RLIMIT_NPROC: 64, unix.RLIMIT_FSIZE: 16 << 20}},
		{"delegated cgroup v2", &limiter{mode: limitCgroup2}, map[int]uint64{unix.RLIMIT_FSIZE: 16 << 20}},
		{"root, disk image", &limiter{mode: limitCgroup1, diskImage: true}, map[int]uint64{}},
	} {
		got := map[int]uint64{}
		for _, r := range c.l.setupRlimits(lim) {
			got[r.Resource] = r.Value
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
