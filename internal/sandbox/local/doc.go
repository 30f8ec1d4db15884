// Package local is the snapshot backend that runs on the trueforge host itself: builds run
// in bubblewrap as root of a user namespace that maps to an unprivileged host id range (an
// id slot, as root) or to the runtime's own uid, and snapshots are overlayfs layers
// stacked on a sanitized copy of the host /etc and the host /usr.
//
// On-disk layout under the builder root (created 0700):
//
//	snapshots/<id>/           one directory per snapshot, release or build; it appears
//	                          atomically (built in tmp/, then renamed)
//	  meta.json               id, kind ("release" or "snapshot"), base, spec, created
//	  layer/<top>/            the layer: one directory per top-level dir in TopDirs
//	  ready                   written last: the snapshot is complete
//	  manifest                (release) what was copied from the host, hashed into the id
//	  pid                     (build) "<pid> <start time>" of the detached supervisor
//	  run.sh                  (build) the supervisor script (for humans; it runs via sh -c)
//	  build.sh                (build) mounts the overlays and execs bwrap, inside unshare
//	  script.sh               (build) the user's build script
//	  build.log               (build) everything the supervisor and the script printed
//	  started                 (build) the sandbox setup got as far as exec'ing bwrap
//	  exit                    (build) the exit status of the sandbox
//	  failed                  (build) one-line reason; written instead of ready
//	  work/, mnt/             (build) overlay workdirs and mount points; removed when the
//	                          build ends
//	tmp/                      staging and trash; entries older than an hour are swept
//
// A build's state is derived from these files alone, so any process can ask for it.
//
// Overlays are always mounted with the userxattr option, as root and unprivileged alike,
// so that layers built by either can be stacked by either: opaque directories are marked
// with user.overlay.opaque and whiteouts are 0/0 character devices. A runtime stacking the
// layers returned by Builder.Layers must mount them the same way.
//
// # Runtime
//
// Runtime (sandbox.Runtime) runs sandboxes on Ready snapshots. A Running sandbox has one
// keeper: this very program, started ahead of the sandbox (Runtime.Spares, spare.go; as
// root a plain process, unprivileged root of a user namespace mapping only the runtime's
// uid), makes the outer namespaces (mount, and network for egress) once it has its
// orders, where its setup step (setup.go) stages what the sandbox gets on a private
// tmpfs, mounts the two overlays of the sandbox (the snapshot's layers under its own
// upper directories) once, prepares the network namespace of an egress sandbox
// (netns.go), and execs bwrap, which unshares every other namespace (pid, ipc,
// uts, cgroup, and net without egress) and runs the sandbox init as PID 1: this very
// program again, bound read-only at /run/trueforge/init and recognised by ReexecMain.
// Each Exec connects to the init's control socket (a host path that is not visible
// inside) and hands it argv, env, cwd and the stdio pipes; the init forks the command.
// Stop kills the keeper, and with PID 1 everything in the sandbox.
//
// The keeper, the setup step, the init, the build shim and the unshift step (shift.go)
// are the program that uses this package (os.Executable: the provider, the harness, a test
// binary) re-executed; the package has no init function, so that program must call
// ReexecMain (backends.ReexecMain outside the backend packages) first thing in main (a
// test binary in TestMain; every command of the module that links the package does,
// TestEveryBinaryCallsReexecMain), and importing the package alone changes no process
// (TestImportDoesNotDispatch).
//
// # Host root is never a sandbox's
//
// As root, every sandbox and every build runs in a user namespace of its own whose ids
// 0..65535 are a slot of the subordinate ids of the system account "trueforge"
// (/etc/subuid, /etc/subgid; scripts/setup-subids.sh makes them; subids.go): the sandbox
// user is host uid <slot>+1000, a build's root host uid <slot>, and no process of theirs
// is ever host uid 0. NewBuilder refuses to work as root without the account's ranges.
// The snapshot layers and the host /usr stay owned by root on disk and are seen through
// idmapped mounts (root's files are the slot's root's inside); a sandbox's own files (its
// upper directories and workspace) belong to its slot on the host, and a build's layer
// is given back to root when the build ends (shift.go). Unprivileged, the runtime's own
// uid is the one id mapped: already unprivileged.
//
// What was checked for the same class of mistake (a guard that assumes an unprivileged
// uid, or a capability check the kernel does not make), with a test that tries it:
//
//   - sysctl writes: checked by effective uid against the file mode, not by capability;
//     host uid 0 could write core_pattern. Now no sandbox or build process is host uid 0
//     (TestAttackHostUID, TestAttackHostUIDEgress, TestAttackBuildSysctls look from the
//     host), and /proc/sys is read-only besides (TestAttackSysctls tries every writable
//     sysctl with its own value, in sandboxes and builds).
//   - /proc entries that act on or reveal the host: covered as OCI runtimes cover them
//     (procmask.go); a build's root, which has every capability in its namespaces, runs
//     in a nested user and mount namespace in which those mounts are locked (the build
//     shim, setup.go), so it cannot unmount them either.
//   - RLIMIT_NPROC: the kernel exempts host uid 0 from it, so the rlimit fallback could
//     not bound a root runtime's sandboxes; it does now (TestLimitsRootRlimitPids).
//   - files of host root: sandbox processes own nothing of the host but their slot's
//     files; as the slot's root a build may chown only within the slot; the runtime's
//     own operations on sandbox files (archive, restore, file transfers, shifting) go
//     through os.Root or lchown and never follow a link out; file transfers to a path in
//     a volume mounted in the workspace go to the volume, through an os.Root of it
//     (TestVolumeFilesInWorkspace, TestVolumeFilesSymlinkEscape).
//   - signals, ptrace and /proc/<pid>: the sandbox's processes see only their pid
//     namespace; the init and the egress helper are not dumpable, so the commands (same
//     uid) cannot reach their memory (TestAttackInit, TestAttackNetdTakeover against both
//     helpers the harness may use).
//   - capabilities inside: commands have none (bounding set empty); mknod of devices is
//     refused in a user namespace by the kernel whatever the capabilities; raw sockets and
//     privileged ports of the host network need capabilities in the host's user
//     namespace, which no sandbox or build has.
//   - the host's network: a build never shares it (buildegress.go: lo alone and an egress
//     proxy, which refuses host loopback, private and link-local addresses whatever the
//     allow list; TestBuildWithoutAllowListRefusesHostServices).
//   - not covered: a sandbox without an egress hook and without BlockNetwork shares the
//     host's network namespace (the harness never creates one): it can reach services
//     on the host's loopback that trust any local connection.
//
// Inside a sandbox:
//
//   - user 1000:1000 with no capabilities, no_new_privs, and a seccomp filter denying new
//     AF_UNIX sockets, ptrace, process_vm_*, pidfd_getfd, keyctl, bpf, io_uring, mount
//     and the new mount API, pivot_root, unshare, setns and namespace-creating clone
//     (clone3 reports ENOSYS). The init itself runs under the same user and filter, is
//     not dumpable, and ignores every signal sent from inside.
//   - root is a read-only tmpfs; /usr, /etc, /opt, /var, /srv, /home and /root are the
//     overlays (writes persist in the sandbox's upper directories, never in the
//     snapshot), root's as on any machine (as root; unprivileged, the one mapped id is
//     everyone's); /workspace is the sandbox's workspace; /tmp (mode 1777) is on the
//     sandbox's disk, emptied when a keeper starts; /proc is the sandbox's own, covered
//     (procmask.go); /dev is minimal and read-only, with /dev/shm a tmpfs of 64 MiB, or a
//     quarter of the memory limit when that is less (it holds host memory, charged to the
//     memory limit when there is one).
//     No host path is writable, and no host path is visible except /usr (read-only,
//     under the overlay) and the egress hook's files and socket directory.
//   - hostname "sandbox"; network: the host's when there is no policy, only lo with
//     BlockNetwork or an Egress hook.
//   - with an Egress hook (egress.go): the directory of the harness's socket, read-only
//     at /run/trueforge/egress (the socket is /run/trueforge/egress/egress.sock; the
//     directory must hold it alone and be writable by the runtime's user only, checked
//     at Create and every start; the socket may be missing at a start; as root it and
//     the hook's files are seen through a mapping that makes the sandbox user their
//     owner, as it is unprivileged), so that a
//     harness listening anew at the same path is reached without a restart; the helper
//     at /run/trueforge/netd, Egress.Files read-only under /run/trueforge, and
//     a file named resolv.conf among them also read-only at /etc/resolv.conf (a symlinked
//     or missing /etc/resolv.conf is first replaced by an empty file in the sandbox's
//     upper layer, never in the snapshot). The init starts the helper as the sandbox
//     user under the base seccomp filter (all but the AF_UNIX rule, which it adds for
//     the commands afterwards) and serves no command until the helper closes the
//     descriptor named by sandbox.EgressReadyEnv (or exits), for at most 5 s, so Create
//     and Start return with the network up. internal/egress's Proxy.Env, Proxy.Egress
//     and cmd/trueforge-netd plug in as they are (TestEgressEndToEnd).
//   - environment: PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin,
//     HOME=/workspace, then CreateRequest.Env, then ExecRequest.Env; cwd /workspace.
//
// Exec: each stream keeps 1 MiB (ExecRequest.OutputCap) as head and tail with a marker;
// a timeout or a cancelled context kills the command's process group (exit code 124 and
// Limit "timeout" for a timeout); processes that left the group (setsid, daemons) keep
// running until Stop, as on any machine; the pipes are drained for at most 2 s after the
// command ended, so a background process holding them cannot hang the caller. A command
// that cannot start exits 127 (not found) or 126. Killed by a signal: 128+signal; killed
// by Stop or a cancel: -1. A keeper that dies under a running command (killed from the
// host, say) makes the Exec fail with sandbox.ErrLost; the next Exec starts a new one.
//
// Lifetime: a keeper lives as long as the Runtime that started it holds the write end of
// its lifeline pipe, so a crashed or killed harness leaves no sandbox process running.
// Another Runtime on the same root (a restarted harness) finds every sandbox in its
// recorded state; a Running one gets a new keeper on its next Exec, files intact.
// NewRuntime sweeps what a crash left (Sweep): stale control sockets, cgroups of dead
// keepers and of vanished sandboxes, disk images mounted for archived or vanished
// sandboxes, staging and trash older than a minute.
//
// Archive packs data/ (upper directories and workspace; whiteouts, user.* xattrs, hard
// links, modes, times and, as root, owners) into archives/<id>.tar.gz and frees data/;
// Start unpacks it. Delete removes the archive too.
//
// Limits (limits.go has the details): cgroup v2 on a pure v2 host (as root, or in a
// delegated cgroup), else cgroup v1 under the runtime's own cgroup (this is the case on
// the CI machines: a hybrid host with no v2 controllers), else rlimits (unprivileged
// without a delegated cgroup: RLIMIT_AS per command, RLIMIT_NPROC and RLIMIT_FSIZE per
// sandbox; no CPU limit: the sandbox runs with the limits that can be enforced, and
// UnenforcedLimits says which are not, unless SetRequireLimits makes Create refuse). Disk, as
// root: data/ is a loop-mounted ext4 image of DiskMB; unprivileged: RLIMIT_FSIZE caps
// each file at DiskMB. Minimums: 16 MiB of memory, 8 pids, 8 MiB of disk. A memory limit
// lets the kernel's OOM killer choose within the sandbox (normally the hog); if it picks
// the init, the running commands fail with ErrLost and the next Exec starts a new keeper.
//
// Other defaults: file operations cap files at 64 MiB (Runtime.MaxFileSize); kills wait
// at most 10 s (Runtime.KillWait); argv and environment of a command total at most 1 MiB;
// a sandbox has at most 64 labels (keys of 1 to 128 bytes, values up to 1024); egress
// files are at most 16 MiB each; the egress helper has 5 s to say it listens; one keeper
// process is kept started ahead (Runtime.Spares, DefaultSpares) once the first sandbox
// has started, with, as root, two idle processes holding user namespaces whose maps it
// writes when it is taken.
//
// Runs as root and as an unprivileged user wherever unprivileged user namespaces work.
package local
