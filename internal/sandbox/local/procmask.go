//go:build linux

package local

import (
	"os"
	"path/filepath"
)

// /proc of a sandbox or a build is its own (its pid namespace's), but much of what /proc
// shows is the host's, and a few entries act on the host. They are covered as OCI
// runtimes (runc, crun) cover them by default, whoever the sandbox's processes are:
//
//   - read-only: /proc/sys (sysctls; the namespaced ones still read the sandbox's own
//     values, hostname among them), /proc/sysrq-trigger, /proc/irq, /proc/bus, /proc/fs;
//   - masked: files under an empty read-only file (readable, empty), directories under
//     an empty read-only tmpfs: kcore, keys, timer_list, sched_debug, acpi, scsi,
//     asound, interrupts, latency_stats, timer_stats.
//
// bwrap resolves a bind's source in the namespace it was started in, so the read-only
// entries are binds of the outer /proc's: the same files (sysctls are looked up in the
// namespaces of whoever reads them, and the other entries show the same host-wide
// values either way). /sys is not in a sandbox at all, so /sys/firmware and the rest of
// runc's /sys entries are absent. Entries this kernel does not have are skipped.

var (
	procReadOnly = []string{"sys", "sysrq-trigger", "irq", "bus", "fs"}
	procMasked   = []string{"kcore", "keys", "timer_list", "sched_debug", "acpi", "scsi", "asound", "interrupts", "latency_stats", "timer_stats"}
)

// procMaskArgs are the bwrap arguments that cover /proc (after --proc /proc). Masked
// files are covered with the staging directory's empty file.
func procMaskArgs() []string {
	var args []string
	for _, name := range procReadOnly {
		p := filepath.Join("/proc", name)
		if _, err := os.Lstat(p); err == nil {
			args = append(args, "--ro-bind", p, p)
		}
	}
	for _, name := range procMasked {
		p := filepath.Join("/proc", name)
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
		case fi.IsDir():
			args = append(args, "--perms", "0555", "--tmpfs", p, "--remount-ro", p)
		default:
			args = append(args, "--ro-bind", filepath.Join(stagingDir, stagedEmpty), p)
		}
	}
	return args
}
