//go:build linux

package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// pipeDrain bounds how long Exec waits for the output pipes once the command has ended
// (or was killed): a process that escaped holding them cannot hang the caller.
const pipeDrain = 2 * time.Second

// Exec runs one command in a fresh bubblewrap sandbox over the sandbox's overlays and
// workspace and returns once it has ended. When ctx ends or the timeout passes, the
// whole exec is killed (process group and pid namespace) and Exec returns the output so
// far with TimedOut (timeout, exit code 124) or ctx's error.
func (r *Runtime) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	res, err := r.exec(ctx, id, req)
	if err != nil {
		return res, fmt.Errorf("local: exec in sandbox %s: %w", id, err)
	}
	return res, nil
}

func (r *Runtime) exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	var res sandbox.ExecResult
	argv := req.Argv
	switch {
	case req.Shell != "" && len(argv) > 0:
		return res, errors.New("both argv and shell given")
	case req.Shell != "":
		argv = []string{"/bin/sh", "-c", req.Shell}
	case len(argv) == 0 || argv[0] == "":
		return res, errors.New("no command given")
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = "/workspace"
	}
	if !path.IsAbs(cwd) {
		return res, fmt.Errorf("working directory %q is not absolute", cwd)
	}
	if err := checkEnv(req.Env); err != nil {
		return res, err
	}
	capacity := req.OutputCap
	if capacity <= 0 {
		capacity = sandbox.DefaultOutputCap
	}

	unlock, err := r.lockSandbox(id, syscall.LOCK_SH)
	if err != nil {
		return res, err
	}
	defer func() {
		if unlock != nil {
			unlock()
		}
	}()
	info, err := r.readInfo(id)
	if err != nil {
		return res, err
	}
	if info.Status != sandbox.SandboxRunning {
		return res, sandbox.ErrStopped
	}
	layers, err := r.b.Layers(info.SnapshotID)
	if err != nil {
		return res, err
	}
	run, err := os.MkdirTemp(r.runDir(id), "x")
	if err != nil {
		return res, err
	}
	defer func() { _ = removeAll(run) }()
	for _, d := range []string{"usr", "rest"} {
		if err := os.MkdirAll(filepath.Join(run, "work", d), 0o700); err != nil {
			return res, err
		}
	}
	env := map[string]string{"PATH": sandboxPath, "HOME": "/workspace"}
	for k, v := range info.Env {
		env[k] = v
	}
	for k, v := range req.Env {
		env[k] = v
	}
	script := r.execScript(id, run, layers, info.BlockNetwork, env, cwd)

	parent := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	stdout, stderr := newCapBuffer(capacity), newCapBuffer(capacity)
	cmd := exec.CommandContext(ctx, r.unshare, append([]string{"-Urm", "/bin/sh", "-c", script, "sh"}, argv...)...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + sandboxPath, "LC_ALL=C"}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = req.Stdin, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if prog := seccompProgram(); prog != nil {
		// bwrap reads the filter from fd 3, inherited through unshare and sh.
		pr, pw, err := os.Pipe()
		if err != nil {
			return res, err
		}
		_, err = pw.Write(prog)
		pw.Close()
		if err != nil {
			pr.Close()
			return res, err
		}
		defer pr.Close()
		cmd.ExtraFiles = []*os.File{pr}
	}
	var startTime atomic.Uint64
	cmd.Cancel = func() error {
		start := startTime.Load()
		if start == 0 {
			start, _ = processStartTime(cmd.Process.Pid)
		}
		return killExecProcs(context.Background(), cmd.Process.Pid, start, r.killWait())
	}
	cmd.WaitDelay = pipeDrain
	// Pdeathsig fires when the creating thread ends, not the process (go.dev/issue/27505):
	// keep this goroutine on its thread until the exec is over.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return res, err
	}
	start, err := processStartTime(cmd.Process.Pid)
	startTime.Store(start)
	pidLine := strconv.Itoa(cmd.Process.Pid) + " " + strconv.FormatUint(start, 10) + "\n"
	if err == nil {
		err = os.WriteFile(filepath.Join(run, "pid"), []byte(pidLine), 0o600)
	}
	if err != nil {
		_ = killExecProcs(context.Background(), cmd.Process.Pid, start, r.killWait())
		_ = cmd.Wait()
		return res, err
	}
	unlock()
	unlock = nil

	waitErr := cmd.Wait()
	res.Duration = time.Since(began)
	// Nothing of the exec outlives it: when the command ends, bwrap's init ends and the
	// kernel kills the rest of the pid namespace before bwrap returns; after a kill,
	// Cancel waited for everything to be gone. (The group is not signalled again here:
	// its leader is reaped, its pid may be reused.)
	res.Stdout, res.Truncated = stdout.Bytes()
	var t bool
	res.Stderr, t = stderr.Bytes()
	res.Truncated = res.Truncated || t
	res.ExitCode = -1
	if st := cmd.ProcessState; st != nil && st.Exited() {
		res.ExitCode = st.ExitCode()
	}
	if ctx.Err() != nil {
		if err := parent.Err(); err != nil {
			return res, err
		}
		res.TimedOut, res.ExitCode = true, 124
		return res, nil
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return res, waitErr
	}
	return res, nil
}

// execScript renders the script "unshare -Urm" runs: mount the sandbox's two overlays
// (the snapshot's layers under the sandbox's upper directories, with this exec's own
// workdirs), then exec bwrap on them with the command as "$@". The mounts vanish with
// the mount namespace when the exec ends.
//
// Each exec mounts the same upper directories (concurrent execs too); every mount has its
// own workdir, since overlayfs empties a workdir when it mounts it.
func (r *Runtime) execScript(id, run string, layers []string, blockNetwork bool, env map[string]string, cwd string) string {
	var sb strings.Builder
	sb.WriteString("set -e\n")
	fmt.Fprintf(&sb, "cd %s\n", shq(r.b.snapshotsDir()))
	dir := r.dir(id)
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
		opts := fmt.Sprintf("userxattr,lowerdir=%s,upperdir=%s/upper/%s,workdir=%s/work/%s", strings.Join(m.lowers, ":"), dir, m.name, run, m.name)
		fmt.Fprintf(&sb, "%s -n -i -t overlay overlay -o %s %s\n", shq(r.mount), shq(opts), shq(filepath.Join(dir, "mnt", m.name)))
	}
	args := []string{r.bwrap, "--unshare-all"}
	if !blockNetwork {
		args = append(args, "--share-net")
	}
	args = append(args, "--die-with-parent", "--new-session", "--hostname", "sandbox",
		"--uid", sandboxUID, "--gid", sandboxUID, "--cap-drop", "ALL")
	if seccompProgram() != nil {
		args = append(args, "--seccomp", "3")
	}
	args = append(args, "--tmpfs", "/")
	for _, top := range TopDirs() {
		src := filepath.Join(dir, "mnt", "rest", top)
		if top == "usr" {
			src = filepath.Join(dir, "mnt", "usr")
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
	args = append(args, "--bind", filepath.Join(dir, "workspace"), "/workspace",
		"--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp",
		"--remount-ro", "/", "--clearenv")
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--setenv", k, env[k])
	}
	args = append(args, "--chdir", cwd, "--")
	sb.WriteString("exec")
	for _, a := range args {
		sb.WriteString(" " + shq(a))
	}
	sb.WriteString(` "$@"` + "\n")
	return sb.String()
}

// capBuffer keeps the first half and the last half of a stream up to its capacity and
// counts what it dropped in between.
type capBuffer struct {
	mu      sync.Mutex
	headCap int
	tailCap int
	head    []byte
	tail    []byte // the last tailCap bytes are the tail
	total   int64
}

func newCapBuffer(capacity int) *capBuffer {
	return &capBuffer{headCap: capacity / 2, tailCap: capacity - capacity/2}
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.total += int64(n)
	if room := c.headCap - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if len(p) >= c.tailCap {
		c.tail = append(c.tail[:0], p[len(p)-c.tailCap:]...)
		return n, nil
	}
	c.tail = append(c.tail, p...)
	if len(c.tail) > 2*c.tailCap {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-c.tailCap:]...)
	}
	return n, nil
}

// Bytes returns the retained output, with a marker where bytes were dropped.
func (c *capBuffer) Bytes() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tail := c.tail
	if len(tail) > c.tailCap {
		tail = tail[len(tail)-c.tailCap:]
	}
	dropped := c.total - int64(len(c.head)) - int64(len(tail))
	var out bytes.Buffer
	out.Write(c.head)
	if dropped > 0 {
		out.WriteString("\n[... " + strconv.FormatInt(dropped, 10) + " bytes truncated ...]\n")
	}
	out.Write(tail)
	return out.Bytes(), dropped > 0
}
