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

// Stop kills every process of the sandbox (its keeper and all it started) and waits
// until they are gone; its files stay. Execs running at the time end with exit code -1;
// later ones fail with ErrStopped until Start.
func (r *Runtime) Stop(ctx context.Context, id string) error {
	return r.lifecycleStep(id, "stop", func(rec record) error {
		// Every exec that got past its status check holds, or held, the shared lock and
		// has handed its command to the init by now; later ones see the new status.
		return r.halt(ctx, id, &rec)
	})
}

// Start makes a Stopped or Archived sandbox Running again (restoring an archive first)
// and starts its keeper.
func (r *Runtime) Start(ctx context.Context, id string) error {
	return r.lifecycleStep(id, "start", func(rec record) error { return r.start(ctx, id, rec) })
}

// lifecycleStep runs one lifecycle operation on sandbox id (op names it in the error)
// with its record read, under the sandbox's exclusive lock: no exec starts, and no other
// step runs, until it returns.
func (r *Runtime) lifecycleStep(id, op string, fn func(rec record) error) error {
	err := func() error {
		unlock, err := r.lockSandbox(id, syscall.LOCK_EX)
		if err != nil {
			return err
		}
		defer unlock()
		rec, err := r.readRecord(id)
		if err != nil {
			return err
		}
		return fn(rec)
	}()
	if err != nil {
		return fmt.Errorf("local: %s sandbox %s: %w", op, id, err)
	}
	return nil
}

// halt records a Running sandbox as Stopped, then stops its keeper and every process
// in it.
func (r *Runtime) halt(ctx context.Context, id string, rec *record) error {
	if rec.Status == sandbox.SandboxRunning {
		rec.Status = sandbox.SandboxStopped
		if err := writeRecord(r.dir(id), *rec); err != nil {
			return err
		}
	}
	return r.stopKeeper(ctx, id)
}

func (r *Runtime) start(ctx context.Context, id string, rec record) error {
	if rec.Status == sandbox.SandboxArchived {
		if err := r.restore(ctx, id, &rec); err != nil {
			if rec.IDs != nil && r.b.ids != nil {
				r.b.ids.release(*rec.IDs, r.dir(id))
			}
			return err
		}
	}
	if rec.Status != sandbox.SandboxRunning {
		rec.Status = sandbox.SandboxRunning
		if err := writeRecord(r.dir(id), rec); err != nil {
			return err
		}
	}
	if rec.Status == sandbox.SandboxRunning {
		_ = os.Remove(r.archivePath(id))
	}
	return r.startAndPing(ctx, id, rec)
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
		var pin *os.File
		if ns, pin = pinSandboxPidNS(pid); pin != nil {
			defer pin.Close()
		}
	}
	if err := killGroup(pid); err != nil {
		return err
	}
	return untilNoneLeft(ctx, deadline, 5*time.Millisecond, func() error {
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
		return fmt.Errorf("processes of exec %d still alive %s after SIGKILL: %s", pid, wait, strings.Join(left, ", "))
	})
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

// pinSandboxPidNS is sandboxPidNS, pinned: the returned file (nil with "") holds a
// reference to the namespace, so that its name, which killPidNS matches, stays its own
// until the caller closes the file. A namespace nobody holds is freed with its last
// process, and the kernel hands its inode number to the next namespace created on the
// host (the lowest free number goes first): a kill loop matching the bare name after
// that would kill another sandbox's or a build's processes.
func pinSandboxPidNS(pid int) (string, *os.File) {
	p := strconv.Itoa(pid)
	data, err := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
	if err != nil {
		return "", nil
	}
	own, _ := os.Readlink("/proc/" + p + "/ns/pid")
	for _, c := range strings.Fields(string(data)) {
		f, err := os.Open("/proc/" + c + "/ns/pid")
		if err != nil {
			continue
		}
		// The name of the namespace the descriptor holds, not of whatever the child's
		// /proc entry shows now.
		ns, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
		if err == nil && ns != own && strings.HasPrefix(ns, "pid:[") {
			return ns, f
		}
		f.Close()
	}
	return "", nil
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

// Delete stops the sandbox and removes everything it had, its archive included. A
// missing sandbox is fine.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return fmt.Errorf("local: delete sandbox: %w", err)
	}
	if err := r.delete(ctx, id); err != nil {
		return fmt.Errorf("local: delete sandbox %s: %w", id, err)
	}
	return nil
}

func (r *Runtime) delete(ctx context.Context, id string) error {
	if _, err := os.Lstat(r.dir(id)); errors.Is(err, fs.ErrNotExist) {
		_ = os.Remove(r.archivePath(id))
		return nil
	}
	unlock, err := r.lockSandbox(id, syscall.LOCK_EX)
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return err
	}
	var slot *idRange
	if unlock != nil {
		defer unlock()
		if rec, err := r.readRecord(id); err == nil {
			slot = rec.IDs
			if rec.Status == sandbox.SandboxRunning {
				// Execs that start now see the sandbox stopped.
				rec.Status = sandbox.SandboxStopped
				_ = writeRecord(r.dir(id), rec)
			}
		}
	}
	if err := r.stopKeeper(ctx, id); err != nil {
		return err
	}
	if err := r.unmountData(r.dir(id)); err != nil {
		return err
	}
	trash, err := os.MkdirTemp(r.tmpDir(), "delete-"+id+"-")
	if err != nil {
		return err
	}
	if err := os.Rename(r.dir(id), filepath.Join(trash, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		_ = os.Remove(trash)
		return err
	}
	_ = os.Remove(r.archivePath(id))
	if err := removeAll(trash); err != nil {
		return fmt.Errorf("remove files: %w", err)
	}
	if slot != nil && r.b.ids != nil {
		r.b.ids.release(*slot, r.dir(id))
	}
	return nil
}
