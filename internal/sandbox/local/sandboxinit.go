//go:build linux

package local

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// The sandbox init: PID 1 of every running sandbox. It is this very binary (whatever
// program uses this package's Runtime or Builder: the harness, the provider, a test
// binary), bound read-only at initPath and started by bwrap as the sandbox user, with no
// capabilities and no_new_privs. ReexecMain below recognises it, first thing in main, by
// its path, its pid and an environment variable that only the keeper sets.
//
// It inherits from the keeper:
//
//	fd 3  the listening control socket (created by the host; its path is not visible
//	      inside the sandbox), on which each connection is one exec
//	fd 4  the lifeline: the read end of a pipe whose write end only the owning Runtime
//	      holds. EOF means the owner stopped the sandbox or died: the init exits, and
//	      with PID 1 the kernel kills everything else in the sandbox.
//
// Start-up order matters for the egress hook. The init first makes itself not dumpable
// and installs the base seccomp filter on itself (all threads; seccomp.go); then it
// starts the helper, which inherits that filter; then it stacks the AF_UNIX filter on
// itself, so that every command it starts afterwards inherits both while the helper,
// which must create AF_UNIX sockets to reach the bound egress socket, may still create
// them but nothing else the commands may not (no user namespace, mount, ptrace, ...).
// The helper makes itself not dumpable as it starts (dumpability is reset by execve), so
// that the commands, which run as the same user, cannot write its memory through /proc.
// No command runs before the helper is ready, so none can reach it before that either.

const (
	prSetNoNewPrivs = 38
	prSetDumpable   = 4

	initPath = "/run/trueforge/init"
	initEnv  = "TRUEFORGE_SANDBOX_INIT"
	// egressEnv tells the init to start the helper at sandbox.EgressHelperPath.
	egressEnv = "TRUEFORGE_SANDBOX_EGRESS"
)

// ReexecMain runs this process as the program the local backend started it as, and
// exits; in any other process it does nothing and returns. The backend runs no binary of
// its own: it re-executes the program that uses it (os.Executable) as six helpers,
// recognised by their arguments, environment and, for the init, pid:
//
//   - a sandbox's keeper (spare.go), started ahead: it waits for its orders, makes the
//     sandbox's mount (and network) namespace and runs the setup step;
//   - the setup step (setup.go), as root (of the host, or of the user namespace
//     unshare or the keeper made) in the sandbox's or build's new mount namespace: it
//     stages and mounts what the sandbox gets and execs bwrap;
//   - the sandbox init (this file), PID 1 of a sandbox;
//   - the build shim (setup.go), which starts a build script in nested namespaces;
//   - the unshift step (shift.go), which gives a finished build's layer back to root;
//   - a build's egress proxy (buildegress.go), beside a build whose network it carries.
//
// Every binary whose process creates local sandboxes or builds (the provider, the
// harness, and the test binary of every package whose tests do) must call it, through
// backends.ReexecMain outside the backend packages, first thing in main (a test binary:
// first in TestMain), before it parses flags, reads configuration, starts goroutines or
// opens anything: these processes run with the privileges of their step and must run
// nothing of the host program's but the step.
// Any other binary need not call it, and importing the package changes nothing: the
// package has no init function, so the provider's and the harness's library code never
// turns into one of these programs behind their back.
func ReexecMain() {
	switch {
	case isInit():
		os.Exit(runInit())
	case isBuildShim():
		os.Exit(runBuildShim())
	case isSetup():
		os.Exit(runSetup())
	case isKeeper():
		os.Exit(runKeeper())
	case isUnshift():
		os.Exit(runUnshift())
	case isBuildProxy():
		os.Exit(runBuildProxy())
	}
}

// isInit reports whether this process is the sandbox init.
func isInit() bool {
	return len(os.Args) > 0 && os.Args[0] == initPath && os.Getenv(initEnv) == "1" && os.Getpid() == 1
}

// sandboxInit is the state of the running init.
type sandboxInit struct {
	devNull *os.File
	// oomScore is the init's own /proc/self/oom_score_adj, opened before the init made
	// itself not dumpable (after that its /proc files belong to the namespace's root and
	// it could not open them); close-on-exec, so no command inherits it.
	oomScore *os.File
	// mu serialises starting a process with reaping, so that a child cannot be reaped
	// before it is registered in waiters.
	mu      sync.Mutex
	waiters map[int]chan syscall.WaitStatus
	// handling is closed once the init handles every signal (runInit); spawn waits for
	// it, so that no process of the sandbox can signal the init before.
	handling chan struct{}
}

func runInit() int {
	in := &sandboxInit{waiters: map[int]chan syscall.WaitStatus{}, handling: make(chan struct{})}
	// Signals sent from inside the sandbox reach PID 1 only if it has a handler for them:
	// handle (and drop) every one that would end the init (initSignals), so that nothing
	// in the sandbox can. Handled, not ignored: ignored signals would stay ignored in the
	// commands. Go takes a round trip to its signal thread for each signal notified, and
	// nothing in the sandbox can send one before the init starts a process there (spawn
	// waits for handling): so it is done beside the start below, not before it.
	sigs := make(chan os.Signal, 64)
	go func() {
		signal.Notify(sigs, initSignals...)
		close(in.handling)
	}()
	// Stop reading what we cannot use before anything can fail loudly.
	devNull, err := os.OpenFile("/dev/null", os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "trueforge init:", err)
		return 1
	}
	in.devNull = devNull
	// Before lockDown: see oomScore. Without it commands keep the init's score (0).
	in.oomScore, _ = os.OpenFile("/proc/self/oom_score_adj", os.O_WRONLY, 0)
	// Descriptors the owner inherited from its own parent without close-on-exec reach us
	// through unshare and bwrap: none of them may reach a command.
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, e := range fds {
			if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
				syscall.CloseOnExec(fd)
			}
		}
	}
	lnFile := os.NewFile(3, "control")
	ln, err := net.FileListener(lnFile)
	lnFile.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "trueforge init: control socket:", err)
		return 1
	}
	lifeline := os.NewFile(4, "lifeline")
	go func() {
		_, _ = io.Copy(io.Discard, lifeline)
		os.Exit(0)
	}()
	go in.reap(sigs)

	if err := lockDown(); err != nil {
		fmt.Fprintln(os.Stderr, "trueforge init: seccomp:", err)
		return 1
	}
	if os.Getenv(egressEnv) == "1" {
		if err := in.startEgressHelper(); err != nil {
			fmt.Fprintln(os.Stderr, "trueforge init: egress helper:", err)
			return 1
		}
	}
	if err := denyUnixSockets(); err != nil {
		fmt.Fprintln(os.Stderr, "trueforge init: seccomp (AF_UNIX):", err)
		return 1
	}
	// From here on nothing is written to the keeper log (a host file): the sandbox user
	// could otherwise fill the host's disk through the init.
	_ = syscall.Dup3(int(devNull.Fd()), 1, 0)
	_ = syscall.Dup3(int(devNull.Fd()), 2, 0)
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return 0
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go in.serve(c.(*net.UnixConn))
	}
}

// initSignals are the signals the init handles: SIGCHLD, for the reaper, and every
// signal that ends a Go program that does not handle it, those of the Go runtime's
// table (runtime/sigtab_linux_generic.go) marked to kill, throw or panic (sent by a
// process, the panicking ones end the program too). Notifying all 64 costs a round trip
// to Go's signal thread each (1.7 to 3.5 ms in all), and the others cannot end or stop
// the init: the Go runtime drops those it handles and is not asked for (SIGUSR1,
// SIGPIPE, SIGURG, the real-time ones, ...), and leaves the stop signals and SIGCONT at
// their default action, which the kernel never applies to a pid namespace's init on a
// signal sent from inside it (nor SIGKILL or SIGSTOP). TestAttackInitSignals sends
// the init every signal from 1 to 64.
var initSignals = []os.Signal{
	syscall.SIGCHLD,
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, // kill
	syscall.SIGQUIT, syscall.SIGILL, syscall.SIGTRAP, syscall.SIGABRT, syscall.SIGSTKFLT, syscall.SIGSYS, // throw
	syscall.SIGBUS, syscall.SIGFPE, syscall.SIGSEGV, // panic
}

// lockDown sets no_new_privs (bwrap already did; it is required for an unprivileged
// filter), makes the init not dumpable, and installs the base seccomp filter on every
// thread of the init. The egress helper is started after it, and runs under that filter.
func lockDown() error {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("no_new_privs: %w", e)
	}
	// Not dumpable: the commands run as the same user, and must not reach the init's
	// memory or descriptors through /proc.
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetDumpable, 0, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("dumpable: %w", e)
	}
	return installFilter(seccompProgram())
}

// denyUnixSockets stacks the AF_UNIX filter on the base one, on every thread of the init:
// every command started afterwards inherits both. Called once the egress helper, which
// needs AF_UNIX sockets, is started (or at once without one).
func denyUnixSockets() error {
	return installFilter(seccompUnixProgram())
}

// installFilter adds prog (a struct sock_filter array; nil: none for this architecture)
// to the seccomp filters of every thread of the process. It needs no_new_privs.
func installFilter(prog []byte) error {
	if prog == nil {
		return nil
	}
	fprog := struct {
		len    uint16
		filter unsafe.Pointer
	}{uint16(len(prog) / 8), unsafe.Pointer(&prog[0])}
	const setModeFilter, flagTsync = 1, 1
	r, _, e := syscall.RawSyscall(uintptr(seccompArchTable.seccomp), setModeFilter, flagTsync, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if e != 0 {
		return e
	}
	if r != 0 {
		return fmt.Errorf("thread %d could not take the filter", r)
	}
	return nil
}

// helperReadyWait bounds how long the init waits for the egress helper to say it listens.
const helperReadyWait = 5 * time.Second

// startEgressHelper starts the helper and waits until it closes its ready descriptor (fd
// 3), exits, or helperReadyWait passed; the init serves no command before that.
func (in *sandboxInit) startEgressHelper() error {
	rd, wr, err := os.Pipe()
	if err != nil {
		return err
	}
	defer rd.Close()
	env := []string{"PATH=" + sandboxPath, "HOME=/workspace", "TRUEFORGE_EGRESS_SOCKET=" + sandbox.EgressSocketPath, sandbox.EgressReadyEnv + "=3"}
	_, err = in.spawn(sandbox.EgressHelperPath, []string{sandbox.EgressHelperPath}, env, "/", []uintptr{in.devNull.Fd(), in.devNull.Fd(), in.devNull.Fd(), wr.Fd()}, nil)
	wr.Close()
	if err != nil {
		return err
	}
	_ = rd.SetReadDeadline(time.Now().Add(helperReadyWait))
	_, _ = io.Copy(io.Discard, rd) // EOF: closed or exited; a timeout: carry on regardless
	return nil
}

// spawn starts a process in a new session (so that its process group can be killed
// as one) and registers ch, if any, for its exit status.
func (in *sandboxInit) spawn(path string, argv, env []string, dir string, files []uintptr, ch chan syscall.WaitStatus) (int, error) {
	<-in.handling
	in.mu.Lock()
	defer in.mu.Unlock()
	if ch != nil {
		// A command: it inherits commandOOMScore from the init, which holds it only
		// while forking (under mu, so the egress helper never inherits it).
		in.setOwnOOMScore(commandOOMScore)
		defer in.setOwnOOMScore("0")
	}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Dir: dir, Env: env, Files: files, Sys: &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		return 0, err
	}
	if ch != nil {
		in.waiters[pid] = ch
	}
	return pid, nil
}

// reap collects every child and orphan of the sandbox (it is PID 1) and hands the
// status of registered ones to their waiter.
func (in *sandboxInit) reap(sigs chan os.Signal) {
	tick := time.NewTicker(time.Second) // in case a SIGCHLD was coalesced away
	defer tick.Stop()
	for {
		select {
		case <-sigs:
		case <-tick.C:
		}
		in.mu.Lock()
		for {
			var st syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &st, syscall.WNOHANG, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil || pid <= 0 {
				break
			}
			if ch, ok := in.waiters[pid]; ok {
				delete(in.waiters, pid)
				ch <- st
			}
		}
		in.mu.Unlock()
	}
}

// serve runs one exec.
func (in *sandboxInit) serve(c *net.UnixConn) {
	defer c.Close()
	var req execRequest
	files, err := readFrame(c, &req, 3)
	if err != nil {
		return
	}
	defer closeAll(files)
	if req.Ping && len(files) == 0 {
		_ = writeFrame(c, initReply{Exited: true}, nil)
		return
	}
	want := 2
	if req.Stdin {
		want = 3
	}
	if len(files) != want || len(req.Argv) == 0 {
		_ = writeFrame(c, initReply{Exited: true, Exit: 126, Error: "malformed exec request"}, nil)
		return
	}
	fds := make([]uintptr, 0, 3)
	if !req.Stdin {
		fds = append(fds, in.devNull.Fd())
	}
	for _, f := range files {
		fds = append(fds, f.Fd())
	}
	path, code, err := lookPath(req.Argv[0], req.Env)
	ch := make(chan syscall.WaitStatus, 1)
	var pid int
	if err == nil {
		code = 126
		pid, err = in.spawn(path, req.Argv, req.Env, req.Dir, fds, ch)
	}
	if err != nil {
		msg := fmt.Sprintf("trueforge: cannot run %s: %v\n", req.Argv[0], err)
		_, _ = files[len(files)-1].WriteString(msg)
		_ = writeFrame(c, initReply{Exited: true, Exit: code, Error: strings.TrimSpace(msg)}, nil)
		return
	}
	closeAll(files)
	if err := writeFrame(c, initReply{Pid: pid}, nil); err != nil {
		killGroupAndWait(pid)
		<-ch
		return
	}
	// Any message or the end of the connection means: kill it.
	killReq := make(chan struct{})
	go func() {
		var m hostMsg
		_, _ = readFrame(c, &m, 0)
		close(killReq)
	}()
	var st syscall.WaitStatus
	killed := false
	select {
	case st = <-ch:
	case <-killReq:
		killed = true
		killGroupAndWait(pid)
		st = <-ch
	}
	rep := initReply{Killed: killed}
	switch {
	case st.Exited():
		rep.Exited, rep.Exit = true, st.ExitStatus()
	case st.Signaled():
		rep.Signal = int(st.Signal())
	}
	if killed {
		// Every process of the group is gone (or the kill failed: say so).
		if groupAlive(pid) {
			rep.Error = "processes of the command's group survived SIGKILL"
		}
	}
	_ = writeFrame(c, rep, nil)
}

// commandOOMScore is the oom_score_adj of every command (its children inherit it): when
// the sandbox is out of memory, the OOM killer takes a command before the init or the
// egress helper (0), whatever their sizes, even where the memory is held by no process
// (a tmpfs, an unmapped memfd). Nothing in the sandbox may lower a score below what its
// parent had (that needs CAP_SYS_RESOURCE on the host), so the init can only raise the
// commands', and a command may lower its own back to 0, the init's: that takes intent,
// and costs the sandbox only its own init.
const commandOOMScore = "500"

// setOwnOOMScore sets the init's own oom_score_adj, so that a command forked meanwhile
// starts with it before it runs a single instruction. Setting a command's score from
// outside after it started loses a race: a command that forks at once (sh -c running
// its command) leaves its children at 0, and until its execve finishes the command
// still has the init's non-dumpable mm, whose /proc files the init may not write. The
// init's own file it writes through a descriptor it opened while still dumpable.
// Lowering the score back to 0 needs no privilege: 0 is the floor the init inherited
// (oom_score_adj_min), which only CAP_SYS_RESOURCE on the host could move.
func (in *sandboxInit) setOwnOOMScore(v string) {
	if in.oomScore != nil {
		_, _ = in.oomScore.WriteAt([]byte(v), 0)
	}
}

// lookPath resolves argv[0] as execvp would, with the command's PATH; the code is the
// shell's status for a failure (127 not found, 126 not executable).
func lookPath(name string, env []string) (string, int, error) {
	if strings.Contains(name, "/") {
		return name, 126, nil
	}
	path := sandboxPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && syscall.Access(p, 1) == nil {
			return p, 126, nil
		}
	}
	return "", 127, fmt.Errorf("%s: command not found", name)
}

// killGroupAndWait SIGKILLs the process group pgid until none of its processes is left
// (they become zombies that the reaper collects), for at most 10 s.
func killGroupAndWait(pgid int) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		if !groupAlive(pgid) || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// groupAlive reports whether a live (not zombie) process of the group pgid exists in
// this pid namespace.
func groupAlive(pgid int) bool {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		data, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
			return true
		}
	}
	return false
}
