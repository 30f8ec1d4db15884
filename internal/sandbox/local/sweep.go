//go:build linux

package local

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// trashAge is how old a staging or trash entry of tmp/ must be before a sweep removes
// it: a live Create or Delete is done with its entry long before.
const trashAge = time.Minute

// Sweep removes what a crashed owner left on the runtime root. NewRuntime runs it; it is
// safe to run at any time, also while another Runtime uses the root:
//
//   - keepers: a Running sandbox whose keeper died (with its owner) keeps its status and
//     gets a new keeper on its next Exec; its stale control socket and pid record go. A
//     keeper still alive for a sandbox that is not Running (a Stop interrupted between
//     recording the status and killing) is killed.
//   - cgroups: those of a sandbox without a live keeper, or of a sandbox that no longer
//     exists, are emptied (SIGKILL) and removed.
//   - mounts: disk images mounted for sandboxes that are archived or gone (including
//     staging and trash directories of tmp/ older than a minute) are unmounted.
//   - tmp/: staging and trash entries older than a minute are removed.
func (r *Runtime) Sweep(ctx context.Context) error {
	var errs []error
	entries, err := os.ReadDir(r.sandboxesDir())
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, e := range entries {
		id := e.Name()
		rec, err := r.readRecord(id)
		if err != nil {
			continue
		}
		known[id] = true
		unlock, err := r.lockFile(filepath.Join(r.dir(id), "keeper.lock"), syscall.LOCK_EX)
		if err != nil {
			continue
		}
		_, _, alive := r.keeperAlive(id)
		switch {
		case alive && rec.Status != sandbox.SandboxRunning:
			if err := r.stopKeeper(ctx, id); err != nil {
				errs = append(errs, err)
			}
		case !alive:
			_ = os.Remove(r.ctlSock(id))
			_ = os.Remove(r.keeperFile(id))
			if err := r.limits.kill(ctx, id, r.killWait()); err != nil {
				errs = append(errs, err)
			}
		}
		if rec.Status == sandbox.SandboxArchived {
			if err := r.unmountData(r.dir(id)); err != nil {
				errs = append(errs, err)
			}
		}
		unlock()
	}
	// Cgroups of sandboxes that are gone.
	for _, p := range r.limits.parent {
		groups, _ := os.ReadDir(p)
		for _, g := range groups {
			if g.IsDir() && !known[g.Name()] && validID(g.Name()) == nil {
				if err := r.limits.kill(ctx, g.Name(), r.killWait()); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	// Mounts under tmp/ (a crash between mounting and publishing, or in a delete), of
	// entries as old as the ones removed below: a younger entry may be another
	// Runtime's Create or Delete at work on the same root, whose mount is not ours to
	// take away. A mount gone meanwhile (its owner finished) is no error.
	for _, m := range mountsUnder(r.tmpDir()) {
		if !r.staleTmp(m) {
			continue
		}
		if out, err := exec.Command("umount", "-l", m).CombinedOutput(); err != nil && slices.Contains(mountsUnder(r.tmpDir()), m) {
			errs = append(errs, errors.New("unmount "+m+": "+strings.TrimSpace(string(out))))
		}
	}
	tmp, _ := os.ReadDir(r.tmpDir())
	for _, e := range tmp {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > trashAge {
			_ = removeAll(filepath.Join(r.tmpDir(), e.Name()))
		}
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points below dir, deepest first.
func mountsUnder(dir string) []string {
	mounts, err := readMounts()
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range mounts {
		if strings.HasPrefix(m.Point, dir+"/") {
			out = append([]string{m.Point}, out...)
		}
	}
	return out
}

// staleTmp reports whether path, under tmp/, belongs to an entry of tmp/ older than
// trashAge (or one that is gone).
func (r *Runtime) staleTmp(path string) bool {
	rel, err := filepath.Rel(r.tmpDir(), path)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return false
	}
	top := filepath.Join(r.tmpDir(), strings.SplitN(rel, string(filepath.Separator), 2)[0])
	info, err := os.Lstat(top)
	return err != nil || time.Since(info.ModTime()) > trashAge
}
