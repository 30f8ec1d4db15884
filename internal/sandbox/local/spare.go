//go:build linux

package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Spare keepers. A keeper starts as this very program in keeper mode (keeperArg), which
// waits for its orders on a socket before it does anything: the setup plan's path and the
// keeper's descriptors (control socket, lifeline, log). Only then does it make the
// sandbox's namespaces (mount, and network for egress) on its own thread and run the
// setup step (setup.go), which ends in bwrap. Starting the program (fork, exec, the Go
// runtime and the package initialisers: a quarter of a cold start, README "Where a local
// cold start goes") depends on no sandbox, so the Runtime keeps Spares of them started
// ahead and hands one to the next keeper it starts.
//
// A spare holds nothing of any sandbox: not a namespace (as root it is a plain process;
// unprivileged, root of a user namespace of its own that maps only the runtime's uid, as
// "unshare -Ur" made before), not a mount, not a descriptor but its orders socket (as
// root also two idle processes in user namespaces without maps yet, nsHolder). The
// mount namespace is copied when the orders come, so it has every mount the host made
// until then (the sandbox's disk image, its volumes). It exits when its orders socket
// closes: when the Runtime drops it, or when its owner process dies.

const (
	// keeperArg is the only argument of a keeper run and keeperEnv marks it, so that
	// neither alone turns a normal run of the program into one.
	keeperArg = "trueforge-sandbox-keeper"
	keeperEnv = "TRUEFORGE_SANDBOX_KEEPER"
	// keeperEnv's values: a keeper started ahead, which has the time to make its user
	// namespace holders, or one started for a sandbox now, which makes its namespaces
	// when it maps them, at the same time.
	keeperAhead = "ahead"
	keeperNow   = "now"
	// ordersFD is the keeper's end of its orders socket.
	ordersFD = 3
	// keeperFiles is how many descriptors come with the orders: control socket,
	// lifeline, log.
	keeperFiles = 3
)

// DefaultSpares is how many keeper processes a Runtime keeps started ahead (Spares).
const DefaultSpares = 1

// spare is a keeper process waiting for its orders.
type spare struct {
	cmd    *exec.Cmd
	start  uint64   // its start time, for the pid file
	orders *os.File // our end of its orders socket
	// done is closed once the process has exited and been reaped (cmd.ProcessState is
	// set): a goroutine waits for it from its start, so a spare that exits on its own
	// (its orders socket closed by a finalizer when a Runtime was dropped without
	// dropSpares) leaves no zombie behind.
	done chan struct{}
}

// wait waits until the spare's process has exited and been reaped.
func (s *spare) wait() { <-s.done }

// exited reports whether the spare's process has exited. Its reaper says so without a
// read of /proc on the way to the sandbox, and as reliably: until it is reaped, its pid
// cannot be reused.
func (s *spare) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (r *Runtime) wantSpares() int {
	if r.Spares != 0 {
		return max(r.Spares, 0)
	}
	return DefaultSpares
}

// spareNice is the nice value a root runtime starts spares at in the background, so
// that starting one (a Go program: a few milliseconds of CPU) takes no CPU from a
// sandbox starting meanwhile. A spare taken gets the runtime's own priority back, and
// its keeper sets it on itself before it runs anything of the sandbox (runKeeperSetup).
const spareNice = 19

// startSpare starts a keeper process that waits for its orders; idle (root only), at
// the lowest CPU priority.
func (r *Runtime) startSpare(idle bool) (*spare, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("keeper orders socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "keeper orders"), os.NewFile(uintptr(fds[1]), "keeper orders")
	defer theirs.Close()
	cmd := exec.Command(r.exe, keeperArg)
	cmd.Dir = "/"
	mode := keeperNow
	if idle {
		mode = keeperAhead
	}
	cmd.Env = []string{"PATH=" + sandboxPath, "LC_ALL=C", keeperEnv + "=" + mode}
	cmd.ExtraFiles = []*os.File{theirs} // ordersFD
	// Its own process group, as the keeper's leader is: the runtime kills the group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if r.b.ids == nil {
		// Unprivileged, the outer user namespace is the one that lets the setup step
		// mount (its root is this user); setgroups denied, as "unshare -r" does.
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	}
	start := cmd.Start
	if idle && os.Geteuid() == 0 {
		start = func() error { return startNiced(cmd) }
	}
	if err := start(); err != nil {
		ours.Close()
		return nil, fmt.Errorf("start the sandbox keeper: %w", err)
	}
	s := &spare{cmd: cmd, orders: ours, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	if s.start, err = processStartTime(cmd.Process.Pid); err != nil {
		s.discard()
		return nil, err
	}
	return s, nil
}

// startNiced starts cmd at spareNice: forked from a thread lowered to it for the moment
// (a process's threads inherit their creator's priority), as root, who can raise the
// thread's priority back.
func startNiced(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	own, err := unix.Getpriority(unix.PRIO_PROCESS, 0) // of this thread: 20 - nice
	if err != nil || unix.Setpriority(unix.PRIO_PROCESS, 0, spareNice) != nil {
		return cmd.Start()
	}
	err = cmd.Start()
	_ = unix.Setpriority(unix.PRIO_PROCESS, 0, 20-own)
	return err
}

// ownNice is this thread's nice value, which the runtime's threads share.
func ownNice() (int, error) {
	p, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	return 20 - p, err
}

// renice gives every thread of the spare nice value nice, so that it finishes starting
// at the runtime's priority; its keeper sets it on itself again once it has its orders
// (a thread started meanwhile may have missed this).
func (s *spare) renice(nice int) {
	pid := strconv.Itoa(s.cmd.Process.Pid)
	tasks, _ := os.ReadDir("/proc/" + pid + "/task")
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			_ = unix.Setpriority(unix.PRIO_PROCESS, tid, nice)
		}
	}
}

// discard ends a spare that will get no orders.
func (s *spare) discard() {
	s.orders.Close()
	_ = s.cmd.Process.Kill()
	s.wait()
}

// send gives the spare its orders: the setup plan's path and the keeper's control
// socket, lifeline and log. It fails when the spare is gone.
func (s *spare) send(plan string, ctl, lifeline, log *os.File) error {
	rights := unix.UnixRights(int(ctl.Fd()), int(lifeline.Fd()), int(log.Fd()))
	err := unix.Sendmsg(int(s.orders.Fd()), []byte(plan), rights, nil, unix.MSG_NOSIGNAL)
	runtime.KeepAlive(ctl)
	runtime.KeepAlive(lifeline)
	runtime.KeepAlive(log)
	s.orders.Close() // the keeper has its orders; it needs the socket no more
	return err
}

// takeSpare returns a started keeper process waiting for its orders: a spare started
// ahead if there is a live one, else a new one. The spares are topped up once the
// sandbox answers (startAndPing), not now: starting one is CPU the starting sandbox
// needs.
func (r *Runtime) takeSpare() (*spare, error) {
	r.spareMu.Lock()
	var s *spare
	if n := len(r.spares); n > 0 {
		s, r.spares = r.spares[n-1], r.spares[:n-1]
	}
	r.spareMu.Unlock()
	if s != nil && !s.exited() {
		if nice, err := ownNice(); err == nil && os.Geteuid() == 0 {
			s.renice(nice)
		}
		return s, nil
	}
	if s != nil {
		s.discard()
	}
	return r.startSpare(false)
}

// refillSpares starts spares in the background until there are wantSpares, one filler
// at a time.
func (r *Runtime) refillSpares() {
	r.spareMu.Lock()
	defer r.spareMu.Unlock()
	if r.filling || len(r.spares) >= r.wantSpares() {
		return
	}
	r.filling = true
	go func() {
		for {
			r.spareMu.Lock()
			if len(r.spares) >= r.wantSpares() {
				r.filling = false
				r.spareMu.Unlock()
				return
			}
			r.spareMu.Unlock()
			s, err := r.startSpare(true)
			r.spareMu.Lock()
			if err != nil {
				// The next keeper starts its own process, and says why if it fails.
				r.filling = false
				r.spareMu.Unlock()
				return
			}
			r.spares = append(r.spares, s)
			r.spareMu.Unlock()
		}
	}()
}

// dropSpares ends the spares started so far.
func (r *Runtime) dropSpares() {
	r.spareMu.Lock()
	list := r.spares
	r.spares = nil
	r.spareMu.Unlock()
	for _, s := range list {
		s.discard()
	}
}

// The keeper's side.

// isKeeper reports whether this process is a keeper waiting for its orders.
func isKeeper() bool {
	mode := os.Getenv(keeperEnv)
	return len(os.Args) == 2 && os.Args[1] == keeperArg && (mode == keeperAhead || mode == keeperNow)
}

// runKeeper waits for the orders and runs the setup step; it returns only on failure,
// or with 0 when the runtime dropped this spare unused.
func runKeeper() int {
	var holders *nsHolders
	if os.Getenv(keeperEnv) == keeperAhead {
		holders = startNSHolders()
	}
	os.Unsetenv(keeperEnv)
	defer holders.stop()
	plan, err := awaitOrders()
	if errors.Is(err, errNoOrders) {
		return 0
	}
	if err == nil {
		err = runKeeperSetup(plan, holders)
	}
	fmt.Fprintln(os.Stderr, "trueforge keeper:", err)
	return 1
}

var errNoOrders = errors.New("the runtime closed the orders socket")

// awaitOrders reads the orders and puts their descriptors where the setup step, bwrap
// and the init expect them: the control socket at 3, the lifeline at 4, the log at 1
// and 2. It returns the plan's path.
func awaitOrders() (string, error) {
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(keeperFiles*4))
	var n, oobn int
	var err error
	for {
		n, oobn, _, _, err = unix.Recvmsg(ordersFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return "", fmt.Errorf("read the orders: %w", err)
	}
	if n == 0 && oobn == 0 {
		return "", errNoOrders
	}
	_ = unix.Close(ordersFD)
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
		fds, _ = unix.ParseUnixRights(&msgs[0])
	}
	if len(fds) != keeperFiles {
		return "", fmt.Errorf("the orders carry %d descriptors, want %d", len(fds), keeperFiles)
	}
	// Each lands on the lowest free numbers, which may be the targets of another: move
	// them above the targets first.
	high := make([]int, len(fds))
	for i, fd := range fds {
		if high[i], err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 10); err != nil {
			return "", err
		}
		_ = unix.Close(fd)
	}
	for _, d := range []struct{ from, to int }{{high[0], 3}, {high[1], 4}, {high[2], 1}, {high[2], 2}} {
		if err := unix.Dup3(d.from, d.to, 0); err != nil {
			return "", err
		}
	}
	for _, fd := range high {
		_ = unix.Close(fd)
	}
	return string(buf[:n]), nil
}

// runKeeperSetup makes the keeper's namespaces on this thread, which it never leaves
// (the setup step execs bwrap from it, and bwrap keeps the thread's namespaces), and runs
// the setup step of the plan at path.
func runKeeperSetup(path string, holders *nsHolders) error {
	p, err := readPlanFile[setupPlan](path)
	if err != nil {
		return err
	}
	p.holders = holders
	runtime.LockOSThread()
	if p.Nice != nil {
		// The runtime's priority (it started this keeper at the lowest): bwrap and
		// everything in the sandbox inherit it from this thread.
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, *p.Nice); err != nil {
			return fmt.Errorf("set the runtime's priority %d: %w", *p.Nice, err)
		}
	}
	flags := unix.CLONE_NEWNS
	if p.NetPrep {
		flags |= unix.CLONE_NEWNET // the sandbox's own network namespace, for egress
	}
	if err := unix.Unshare(flags); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	// As "unshare -m" does: nothing mounted here reaches the host, and nothing the host
	// mounts from now on reaches the sandbox.
	if err := unix.Mount("none", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the mounts private: %w", err)
	}
	return p.run()
}

// keeperPidLine is the content of a keeper's pid file.
func keeperPidLine(pid int, start uint64) []byte {
	return []byte(strconv.Itoa(pid) + " " + strconv.FormatUint(start, 10) + "\n")
}

// nsHolder is a process in a user namespace of its own whose id maps are not written
// yet. A keeper started ahead as root makes two while it waits (its id slot's and the
// sandbox user's, setup.go), and its setup step only writes their maps and opens them
// when the orders come, instead of starting a process for each then. The holder runs
// sleep as the namespace's unmapped user, with nothing of the sandbox's; it is killed
// as soon as its namespace is open, and with the keeper if that dies first.
type nsHolder struct{ cmd *exec.Cmd }

// nsHolders are the keeper's two holders; either may be nil.
type nsHolders struct{ slot, user *nsHolder }

func startNSHolder() *nsHolder {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		return nil
	}
	cmd := exec.Command(sleep, "infinity")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, Pdeathsig: syscall.SIGKILL}
	if cmd.Start() != nil {
		return nil
	}
	return &nsHolder{cmd: cmd}
}

// startNSHolders makes the holders of a root keeper; unprivileged (no id slot) it needs
// none.
func startNSHolders() *nsHolders {
	if os.Geteuid() != 0 {
		return nil
	}
	return &nsHolders{slot: startNSHolder(), user: startNSHolder()}
}

// mapAndOpen writes the holder's maps (inner ids 0..size-1 are host uids uid.. and
// gids gid..), as newUserNS does for a namespace it makes, and returns a descriptor of
// the namespace.
func (h *nsHolder) mapAndOpen(uid, gid, size uint32) (int, error) {
	if h == nil {
		return -1, errors.New("no holder")
	}
	pid := strconv.Itoa(h.cmd.Process.Pid)
	for _, m := range []struct{ file, line string }{
		{"gid_map", fmt.Sprintf("0 %d %d\n", gid, size)},
		{"uid_map", fmt.Sprintf("0 %d %d\n", uid, size)},
	} {
		if err := os.WriteFile("/proc/"+pid+"/"+m.file, []byte(m.line), 0); err != nil {
			return -1, err
		}
	}
	return syscall.Open("/proc/"+pid+"/ns/user", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
}

// stop ends the holders; the namespaces opened from them stay as long as their
// descriptors.
func (hs *nsHolders) stop() {
	if hs == nil {
		return
	}
	for _, h := range []*nsHolder{hs.slot, hs.user} {
		if h != nil {
			_ = h.cmd.Process.Kill()
			_ = h.cmd.Wait()
		}
	}
}
