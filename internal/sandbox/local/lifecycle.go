//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Stop kills every process of the sandbox and waits until they are gone; its files stay.
// Execs running at the time end with exit code -1; later ones fail with ErrStopped until
// Start.
func (r *Runtime) Stop(ctx context.Context, id string) error {
	if err := r.setStatus(ctx, id, sandbox.SandboxStopped); err != nil {
		return fmt.Errorf("local: stop sandbox %s: %w", id, err)
	}
	return nil
}

// Start lets a stopped sandbox run commands again.
func (r *Runtime) Start(ctx context.Context, id string) error {
	if err := r.setStatus(ctx, id, sandbox.SandboxRunning); err != nil {
		return fmt.Errorf("local: start sandbox %s: %w", id, err)
	}
	return nil
}

func (r *Runtime) setStatus(ctx context.Context, id, status string) error {
	info, err := r.readInfo(id)
	if err != nil {
		return err
	}
	unlock, err := r.lockSandbox(id, syscall.LOCK_EX)
	if err != nil {
		return err
	}
	if info.Status != status {
		info.Status = status
		err = writeInfo(r.dir(id), info)
	}
	// Every exec that got past its status check holds, or held, the shared lock and has
	// recorded its pid by now; later ones see the new status.
	unlock()
	if err != nil || status != sandbox.SandboxStopped {
		return err
	}
	return r.killAll(ctx, id)
}

// killAll kills every exec recorded in the sandbox's run/ directory and waits for all
// their processes, including those inside the sandbox's pid namespace, to disappear.
func (r *Runtime) killAll(ctx context.Context, id string) error {
	entries, err := os.ReadDir(r.runDir(id))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var errs []error
	for _, e := range entries {
		pid, start, err := readPidFile(filepath.Join(r.runDir(id), e.Name(), "pid"))
		if err != nil || !processAlive(pid, start) {
			// Never started, or ended (its Exec removes the directory), or its owner
			// crashed: nothing runs any more under that record.
			continue
		}
		if err := r.killExec(ctx, pid, start); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killExec kills one exec: its process group (unshare, sh, the outer bwrap) and every
// process in the sandbox's pid namespace; it returns once all are gone.
func (r *Runtime) killExec(ctx context.Context, pid int, start uint64) error {
	return killExecProcs(ctx, pid, start, r.killWait())
}

// killExecProcs stops the exec's process group first, so that bwrap cannot create the
// sandbox (or anything else) while it is being looked at: a sandbox cloned just before
// SIGKILL would otherwise be missed, and might not yet have asked to die with its parent.
// Then it finds the sandbox's pid namespace, kills the group and everything in the
// namespace, and waits for all of it to be gone.
func killExecProcs(ctx context.Context, pid int, start uint64, wait time.Duration) error {
	// Let the setup (overlay mounts, bwrap creating the sandbox) finish first: it takes
	// tens of milliseconds, and a setup killed in the middle of a mount was seen to
	// leave its processes stuck in the kernel for many seconds on some hosts.
	deadline := time.Now().Add(wait)
	setup := time.Now().Add(min(wait, setupWait))
	for processAlive(pid, start) && sandboxPidNS(pid) == "" && time.Now().Before(setup) {
		time.Sleep(2 * time.Millisecond)
	}
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop process group %d: %w", pid, err)
	}
	for {
		state, s, err := procStat(pid)
		if err != nil || s != start || state == 'T' || state == 't' || state == 'Z' || state == 'X' {
			break
		}
		if time.Now().After(deadline) {
			break // kill it anyway
		}
		time.Sleep(time.Millisecond)
	}
	ns := ""
	if processAlive(pid, start) {
		ns = sandboxPidNS(pid)
	}
	if err := killGroup(pid); err != nil {
		return err
	}
	for {
		var left []string
		if processAlive(pid, start) {
			left = append(left, procDesc(pid))
		}
		if ns != "" {
			left = append(left, killPidNS(ns)...)
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of exec %d still alive %s after SIGKILL: %s", pid, wait, strings.Join(left, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// sandboxPidNS returns the pid namespace ("pid:[inode]") of the sandbox started by the
// exec whose leader (exec'd into the outer bwrap) is pid: the namespace of bwrap's child,
// or "" if there is none yet.
func sandboxPidNS(pid int) string {
	p := strconv.Itoa(pid)
	data, err := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
	if err != nil {
		return ""
	}
	own, _ := os.Readlink("/proc/" + p + "/ns/pid")
	for _, c := range strings.Fields(string(data)) {
		if ns, err := os.Readlink("/proc/" + c + "/ns/pid"); err == nil && ns != own {
			return ns
		}
	}
	return ""
}

// procDesc describes a process for an error message: pid, state and name.
func procDesc(pid int) string {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	s := string(data)
	if i := strings.IndexByte(s, '('); i >= 0 && len(s) > i+40 {
		s = s[:i+40]
	}
	return strings.TrimSpace(s)
}

// setupWait bounds how long a kill waits for an exec's setup to finish.
const setupWait = 2 * time.Second

// killPidNS SIGKILLs every live process in the pid namespace ns and describes those it
// found.
func killPidNS(ns string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if l, err := os.Readlink(d + "/ns/pid"); err == nil && l == ns {
			if pid, err := strconv.Atoi(filepath.Base(d)); err == nil {
				if state, _, err := procStat(pid); err == nil && state != 'Z' && state != 'X' {
					found = append(found, procDesc(pid))
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
	return found
}

// Delete stops the sandbox and removes everything it had. A missing sandbox is fine.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return fmt.Errorf("local: delete sandbox: %w", err)
	}
	if _, err := os.Lstat(r.dir(id)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := r.setStatus(ctx, id, sandbox.SandboxStopped); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return fmt.Errorf("local: delete sandbox %s: %w", id, err)
	}
	trash, err := os.MkdirTemp(r.tmpDir(), "delete-"+id+"-")
	if err != nil {
		return fmt.Errorf("local: delete sandbox %s: %w", id, err)
	}
	if err := os.Rename(r.dir(id), filepath.Join(trash, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		_ = os.Remove(trash)
		return fmt.Errorf("local: delete sandbox %s: %w", id, err)
	}
	if err := removeAll(trash); err != nil {
		return fmt.Errorf("local: delete sandbox %s: remove files: %w", id, err)
	}
	return nil
}

// Archive is not supported by the local runtime yet; the sandbox is left as it was.
func (r *Runtime) Archive(ctx context.Context, id string) error {
	return fmt.Errorf("local: archive sandbox %s: %w", id, errors.ErrUnsupported)
}
