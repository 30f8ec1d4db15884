//go:build linux

package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress/netd"
)

// The setup step: the last program of a keeper's (or a build's) outer namespace before
// bwrap. The keeper script (keeper.go) or build.sh (buildscript.go) execs this very
// program in setup mode inside the mount namespace "unshare" made (and the network
// namespace, for egress), with the plan that the runtime or builder wrote to a file:
//
//  1. a tmpfs at stagingDir, private to this namespace, where everything bwrap binds
//     is gathered (bind mounts of host paths, overlays). bwrap resolves its sources as
//     the sandbox user or the slot's root, who may not traverse the runtime's root-only
//     directories; the staging tmpfs is world-traversable and holds only what the
//     sandbox is meant to get. /sys is used because it exists on every Linux host,
//     nothing of this step needs it, and no sandbox binds it.
//  2. as root, each bind of the plan, idmapped where asked (mount_setattr with a user
//     namespace made for the purpose, newUserNS): the snapshot layers and the host /usr
//     through the slot's mapping (inner 0..65535 = the slot), so that files owned by
//     root on disk appear owned by root inside and copy-up can give them to the slot;
//     the egress directories through a one-id mapping to the sandbox user, so that the
//     sandbox user owns them inside as it did when it mapped to their owner.
//  3. the overlays, with those layers as lowers and the sandbox's (or build's) upper
//     directories, which belong to the slot on the host.
//  4. the network namespace prepared for the egress helper (lo up, DNS port), and
//     /etc/resolv.conf made a regular file in the sandbox's upper layer.
//  5. for a sandbox, the namespace leaves the host's mounts: its root becomes a tmpfs
//     with the staging directory (still at stagingDir) and only the host paths bwrap
//     itself needs, and the host's root is detached in one call (leaveHost); a build
//     unmounts the host's loop-backed file systems instead (dropForeignMounts).
//  6. exec bwrap: as root with --userns for a sandbox (bwrap switches to the sandbox
//     user, 1000 in the slot, before it mounts anything); as the slot's root, owner of
//     the user namespace, for a build (bwrap keeps its capabilities there: the build
//     runs as root of the slot with a full capability set inside, and no privilege on
//     the host).
//
// Unprivileged (no slot), the same steps run as root of the outer user namespace, with
// no idmapping, and bwrap makes the sandbox's user namespace itself as before.

const (
	// setupArg is the only argument of a setup run and setupEnv names its plan file, so
	// that neither alone turns a normal run of the program into one.
	setupArg = "trueforge-sandbox-setup"
	setupEnv = "TRUEFORGE_SANDBOX_SETUP"

	stagingDir = "/sys"
	// userNSArg in a plan's Argv stands for the descriptor of the slot's user namespace.
	userNSArg = "{userns}"
	// stagedEmpty is an empty read-only file of the staging directory, bound over the
	// /proc files that are masked.
	stagedEmpty = "empty"
)

// Kinds of idmapping of a staged bind.
const (
	mapNone = ""
	mapSlot = "slot" // inner 0..65535 = the slot's host ids
	mapUser = "user" // inner 0 (the files' owner on the host: root) = the sandbox user
)

// setupPlan is what the setup step does, written as JSON by the runtime or builder.
type setupPlan struct {
	Binds    []stageBind    `json:"binds,omitempty"`
	Overlays []stageOverlay `json:"overlays,omitempty"`
	// IDs is the slot (root only). SandboxUser is the inner uid that mapUser maps to.
	IDs         *idRange `json:"ids,omitempty"`
	SandboxUser uint32   `json:"sandbox_user,omitempty"`
	// AsSlotRoot runs bwrap as the slot's root, owner of the user namespace (builds).
	AsSlotRoot bool `json:"as_slot_root,omitempty"`
	// NetPrep prepares the network namespace for the egress helper.
	NetPrep    bool   `json:"netprep,omitempty"`
	ResolvConf string `json:"resolv_conf,omitempty"` // staging-relative etc directory
	Started    string `json:"started,omitempty"`     // file created just before exec
	// Nice is the runtime's nice value, which a keeper started at a lower priority sets
	// on itself first (spare.go). Root keepers only.
	Nice *int `json:"nice,omitempty"`
	// Rlimits are set on this process just before bwrap (limits.go, setupRlimits).
	Rlimits []rlimitSetting `json:"rlimits,omitempty"`
	// LeaveHost makes the staging directory, with the host paths bwrap itself needs,
	// this namespace's whole root before bwrap (leaveHost) instead of unmounting the
	// host's loop-backed file systems one by one (dropForeignMounts). Sandboxes only.
	LeaveHost bool     `json:"leave_host,omitempty"`
	Unshare   string   `json:"unshare,omitempty"`
	Sleep     string   `json:"sleep,omitempty"`
	Argv      []string `json:"argv"`
	// holders, when a keeper started ahead made them, give the user namespaces without
	// a process started now (spare.go); stopped before bwrap.
	holders *nsHolders
}

// rlimitSetting is one rlimit (soft and hard) of a setup plan.
type rlimitSetting struct {
	Resource int    `json:"resource"`
	Value    uint64 `json:"value"`
}

// stageBind binds host path Src at Dst under stagingDir.
type stageBind struct {
	Src string `json:"src"`
	Dst string `json:"dst"`
	Map string `json:"map,omitempty"`
	// Volume: Src is a volume's directory and Beneath the folder of it to bind, both
	// resolved without following symbolic links (stageVolume).
	Volume  bool   `json:"volume,omitempty"`
	Beneath string `json:"beneath,omitempty"`
}

// stageOverlay mounts an overlay at Dst under stagingDir: Lowers are relative to
// stagingDir (short, so that the option fits in a page), Upper and Work host paths.
type stageOverlay struct {
	Dst    string   `json:"dst"`
	Lowers []string `json:"lowers"`
	Upper  string   `json:"upper"`
	Work   string   `json:"work"`
}

// isSetup reports whether this process is a setup step.
func isSetup() bool {
	return len(os.Args) == 2 && os.Args[1] == setupArg && os.Getenv(setupEnv) != ""
}

// runSetup runs the setup step; it returns only on failure.
func runSetup() int {
	p, err := readPlan[setupPlan](setupEnv)
	if err == nil {
		err = p.run()
	}
	fmt.Fprintln(os.Stderr, "trueforge setup:", err)
	return 1
}

// readPlan decodes the JSON file that variable env names into a new T and unsets env, so
// that nothing this process starts inherits it: how a re-executed helper (a setup step,
// the build's proxy) reads the orders its parent wrote.
func readPlan[T any](env string) (T, error) {
	path := os.Getenv(env)
	os.Unsetenv(env)
	return readPlanFile[T](path)
}

// readPlanFile decodes the JSON file at path into a new T.
func readPlanFile[T any](path string) (T, error) {
	var v T
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, &v)
	}
	return v, err
}

func (p setupPlan) run() error {
	if len(p.Argv) == 0 {
		return errors.New("plan has no command")
	}
	if err := syscall.Mount("tmpfs", stagingDir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("staging tmpfs on %s: %w", stagingDir, err)
	}
	userns, userFile := -1, -1
	if p.IDs != nil {
		owner := uint32(0)
		if p.AsSlotRoot {
			owner = p.IDs.UID
		}
		// The sandbox user's namespace (for mapUser binds) is made alongside.
		var userErr error
		var wg sync.WaitGroup
		var slotHolder, userHolder *nsHolder
		if p.holders != nil && owner == 0 {
			slotHolder, userHolder = p.holders.slot, p.holders.user
		}
		if slices.ContainsFunc(p.Binds, func(b stageBind) bool { return b.Map == mapUser }) {
			wg.Go(func() {
				userFile, userErr = p.userNS(userHolder, 0, p.IDs.hostUID(p.SandboxUser), p.IDs.hostGID(p.SandboxUser), 1)
			})
		}
		var err error
		userns, err = p.userNS(slotHolder, owner, p.IDs.UID, p.IDs.GID, idsPerSlot)
		wg.Wait()
		p.holders.stop()
		if err != nil {
			return fmt.Errorf("user namespace of id slot %d: %w", p.IDs.Slot, err)
		}
		if userErr != nil {
			return fmt.Errorf("user namespace of the sandbox user: %w", userErr)
		}
	}
	for _, b := range p.Binds {
		ns := -1
		switch b.Map {
		case mapSlot:
			ns = userns
		case mapUser:
			ns = userFile
		}
		if b.Map != mapNone && ns < 0 {
			return fmt.Errorf("bind %s: idmapping %q needs an id slot", b.Src, b.Map)
		}
		if err := stage(b, ns); err != nil {
			return err
		}
	}
	if userFile >= 0 {
		syscall.Close(userFile)
	}
	if err := os.Chdir(stagingDir); err != nil {
		return err
	}
	for _, o := range p.Overlays {
		if err := os.MkdirAll(o.Dst, 0o755); err != nil {
			return err
		}
		opts := "userxattr,lowerdir=" + strings.Join(o.Lowers, ":") + ",upperdir=" + o.Upper + ",workdir=" + o.Work
		if err := syscall.Mount("overlay", o.Dst, "overlay", 0, opts); err != nil {
			return fmt.Errorf("overlay %s (%s): %w", o.Dst, opts, err)
		}
	}
	if p.NetPrep {
		if err := netd.PrepareNamespace(); err != nil {
			return fmt.Errorf("network namespace: %w", err)
		}
	}
	if p.ResolvConf != "" {
		if err := prepareResolvConf(filepath.Join(stagingDir, p.ResolvConf), p.IDs); err != nil {
			return fmt.Errorf("/etc/resolv.conf: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(stagingDir, stagedEmpty), nil, 0o444); err != nil {
		return err
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if p.Started != "" {
		// A host path: before leaveHost.
		if err := os.WriteFile(p.Started, nil, 0o600); err != nil {
			return err
		}
	}
	// Staged: nothing outside the staging directory is bound any more, so other file
	// systems need not be pinned by this namespace (setup_mounts_linux.go).
	if p.LeaveHost {
		if err := leaveHost(p.Argv[0]); err != nil {
			return err
		}
	} else {
		dropForeignMounts()
	}
	argv := make([]string, len(p.Argv))
	for i, a := range p.Argv {
		if a == userNSArg {
			if userns < 0 {
				return errors.New("the command needs a user namespace, and the plan has no id slot")
			}
			if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(userns), syscall.F_SETFD, 0); e != 0 {
				return e
			}
			a = strconv.Itoa(userns)
		}
		argv[i] = a
	}
	for _, rl := range p.Rlimits {
		if err := syscall.Setrlimit(rl.Resource, &syscall.Rlimit{Cur: rl.Value, Max: rl.Value}); err != nil {
			return fmt.Errorf("rlimit %d: %w", rl.Resource, err)
		}
	}
	if p.AsSlotRoot {
		// The build's bwrap runs as the slot's root: the owner of the user namespace it
		// joins, so it has every capability there and none on the host.
		if err := syscall.Setgroups(nil); err != nil {
			return fmt.Errorf("drop groups: %w", err)
		}
		if err := syscall.Setresgid(int(p.IDs.GID), int(p.IDs.GID), int(p.IDs.GID)); err != nil {
			return fmt.Errorf("become gid %d: %w", p.IDs.GID, err)
		}
		if err := syscall.Setresuid(int(p.IDs.UID), int(p.IDs.UID), int(p.IDs.UID)); err != nil {
			return fmt.Errorf("become uid %d: %w", p.IDs.UID, err)
		}
	}
	err := syscall.Exec(argv[0], argv, os.Environ())

	return fmt.Errorf("exec %s: %w", argv[0], err)
}

// userNS returns a descriptor of a user namespace owned by owner that maps size ids
// from uid and gid: h's, when there is a holder started ahead and it takes the maps,
// else a new one.
func (p setupPlan) userNS(h *nsHolder, owner, uid, gid, size uint32) (int, error) {
	if h != nil {
		if fd, err := h.mapAndOpen(uid, gid, size); err == nil {
			return fd, nil
		}
	}
	return newUserNS(p.Unshare, p.Sleep, owner, uid, gid, size)
}

// stage binds b.Src at b.Dst under stagingDir, through the user namespace ns (a
// descriptor; -1 for none) as an idmapped mount.
func stage(b stageBind, ns int) error {
	if b.Volume {
		return stageVolume(b, ns)
	}
	fi, err := os.Stat(b.Src)
	if err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	target := filepath.Join(stagingDir, b.Dst)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	if fi.IsDir() {
		err = os.Mkdir(target, 0o755)
	} else {
		err = os.WriteFile(target, nil, 0o444)
	}
	if err != nil {
		return err
	}
	if ns < 0 {
		if err := syscall.Mount(b.Src, target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", b.Src, err)
		}
		return nil
	}
	flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC)
	attrFlags := uint(unix.AT_EMPTY_PATH)
	if fi.IsDir() {
		flags |= unix.AT_RECURSIVE
		attrFlags |= unix.AT_RECURSIVE
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, b.Src, flags)
	if err != nil {
		return fmt.Errorf("clone mount of %s: %w", b.Src, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns)}
	if err := unix.MountSetattr(fd, "", attrFlags, &attr); err != nil {
		return idmapError(b.Src, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach idmapped %s: %w", b.Src, err)
	}
	return nil
}

// probeIDMapDir makes an idmapped clone of dir through ns and drops it.
func probeIDMapDir(dir string, ns int) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("clone mount of %s: %w", dir, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns)}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return idmapError(dir, err)
	}
	return nil
}

// idmapError explains a failed idmapping.
func idmapError(path string, err error) error {
	fs := "?"
	var st unix.Statfs_t
	if unix.Statfs(path, &st) == nil {
		fs = "0x" + strconv.FormatInt(int64(st.Type), 16) //nolint:unconvert // int32 on 32-bit Linux
	}
	return fmt.Errorf("idmapped mount of %s (filesystem type %s): %w; as root the local backend needs idmapped mounts "+
		"(Linux 5.19 or newer, and the snapshots, the host /usr and the runtime's data on ext4, xfs, btrfs or tmpfs)", path, fs, err)
}

// newUserNS returns a descriptor of a new user namespace owned by host uid owner (as
// its creator) in which ids 0..size-1 are host uids uid.. and gids gid..: a process of
// its own makes it for a moment (a multithreaded program cannot make one for itself),
// this process, root, writes its maps and keeps a descriptor; the process goes, the
// namespace stays as long as the descriptor or a process of it.
func newUserNS(unshareBin, sleepBin string, owner, uid, gid, size uint32) (int, error) {
	if owner == 0 {
		// Owned by root, this process: the namespace is made by the clone that starts
		// the process, and its maps are written before it runs anything.
		cmd := exec.Command(sleepBin, "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(uid), Size: int(size)}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(gid), Size: int(size)}},
			GidMappingsEnableSetgroups: true}
		if err := cmd.Start(); err != nil {
			return -1, err
		}
		defer func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}()
		return syscall.Open("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/ns/user", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	}
	// Owned by another user: only a process of that user can make it (the owner is the
	// creator), so "unshare --user" does, started as that user, and root writes the maps.
	cmd := exec.Command(unshareBin, "--user", sleepBin, "60")
	cmd.Env = []string{"PATH=" + sandboxPath}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: owner, Gid: gid}}
	if err := cmd.Start(); err != nil {
		return -1, err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	pid := strconv.Itoa(cmd.Process.Pid)
	self, err := os.Readlink("/proc/self/ns/user")
	if err != nil {
		return -1, err
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		ns, err := os.Readlink("/proc/" + pid + "/ns/user")
		if err != nil {
			return -1, fmt.Errorf("unshare --user exited: %w", err)
		}
		if ns != self {
			break
		}
		if time.Now().After(deadline) {
			return -1, errors.New("unshare --user made no user namespace within 5 s")
		}
		time.Sleep(100 * time.Microsecond)
	}
	for _, m := range []struct{ file, line string }{
		{"gid_map", fmt.Sprintf("0 %d %d\n", gid, size)},
		{"uid_map", fmt.Sprintf("0 %d %d\n", uid, size)},
	} {
		if err := os.WriteFile("/proc/"+pid+"/"+m.file, []byte(m.line), 0); err != nil {
			return -1, fmt.Errorf("write %s: %w", m.file, err)
		}
	}
	fd, err := syscall.Open("/proc/"+pid+"/ns/user", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	return fd, nil
}

// prepareResolvConf makes etc/resolv.conf (etc is an overlay directory of the staging
// area) a regular file that resolv.conf can be bound over: a symlink (to
// systemd-resolved's stub file, say, which does not exist in the sandbox) or a missing
// file is replaced by an empty file, in the sandbox's upper layer only, owned by the
// slot's root. An etc that is not a plain directory is left alone (bwrap then refuses
// to start).
func prepareResolvConf(etc string, ids *idRange) error {
	if fi, err := os.Lstat(etc); err != nil || !fi.IsDir() {
		return nil //nolint:nilerr // left alone: bwrap refuses an etc that is not a directory
	}
	f := filepath.Join(etc, "resolv.conf")
	if fi, err := os.Lstat(f); err == nil && fi.Mode()&os.ModeSymlink == 0 {
		return nil
	}
	_ = os.Remove(f)
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		return err
	}
	if ids != nil {
		return os.Lchown(f, int(ids.UID), int(ids.GID))
	}
	return nil
}

// writePlan writes a setup plan for the setup step to read.
func writePlan(path string, p setupPlan) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, data, 0o600)
}

// The build shim. A build script runs as root with every capability in the namespaces
// bwrap made, the mount namespace among them, so it could unmount what covers /proc
// (procmask.go). The shim, this program bound read-only at initPath, starts the script
// in a user namespace and a mount namespace of its own, nested in bwrap's, with the same
// ids (0 is still root, with every capability, and owns the same files): the mounts the
// new mount namespace copies from a more privileged one are locked, so the script can
// add mounts but not remove or change bwrap's, and a new /proc needs capabilities over
// the pid namespace that the nested user namespace does not have.
const (
	buildShimArg = "trueforge-build-shim"
	buildShimEnv = "TRUEFORGE_BUILD_SHIM"
)

func isBuildShim() bool {
	return len(os.Args) > 2 && os.Args[0] == initPath && os.Args[1] == buildShimArg && os.Getenv(buildShimEnv) == "1"
}

// runBuildShim runs os.Args[2:] in the nested namespaces and exits with its status.
func runBuildShim() int {
	os.Unsetenv(buildShimEnv)
	stopNetd, err := startBuildNetd() // buildegress.go: the build's network, if it has one
	if err != nil {
		fmt.Fprintln(os.Stderr, "trueforge build shim:", err)
		return 126
	}
	defer stopNetd()
	maps, err := identityMaps("/proc/self/uid_map")
	var gmaps []syscall.SysProcIDMap
	if err == nil {
		gmaps, err = identityMaps("/proc/self/gid_map")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "trueforge build shim:", err)
		return 126
	}
	cmd := exec.Command(os.Args[2], os.Args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// setgroups stays allowed only where it is (bwrap denies it in a user namespace of
	// its own, unprivileged), and then the shim may not set the groups either.
	sg, _ := os.ReadFile("/proc/self/setgroups")
	allow := strings.TrimSpace(string(sg)) == "allow"
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: maps, GidMappings: gmaps, GidMappingsEnableSetgroups: allow,
		Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: !allow},
	}
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return exit.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "trueforge build shim:", err)
		return 126
	}
	return 0
}

// identityMaps maps every id of the current user namespace (an uid_map or gid_map file)
// to itself.
func identityMaps(file string) ([]syscall.SysProcIDMap, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []syscall.SysProcIDMap
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		inner, err1 := strconv.Atoi(f[0])
		size, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: %q", file, line)
		}
		out = append(out, syscall.SysProcIDMap{ContainerID: inner, HostID: inner, Size: size})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s maps no id", file)
	}
	return out, nil
}
