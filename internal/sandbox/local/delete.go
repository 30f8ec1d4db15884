package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// killWait bounds how long DeleteSnapshot waits for a killed build to disappear.
const killWait = 10 * time.Second

// DeleteSnapshot stops a running build (its whole process group; the sandbox inside dies
// with it through bwrap's --die-with-parent) and removes the snapshot. A missing snapshot
// is not an error. Snapshots stacked on this one stop being usable: their BuildState turns
// Failed.
func (b *Builder) DeleteSnapshot(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return fmt.Errorf("local: delete snapshot: %w", err)
	}
	dir := b.snapDir(id)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if pid, start, err := readPidFile(filepath.Join(dir, "pid")); err == nil && processAlive(pid, start) {
		if err := stopGroup(ctx, pid, start); err != nil {
			return fmt.Errorf("local: delete snapshot %s: stop build: %w", id, err)
		}
	}
	// Move it out of the way first, so nobody sees a half-removed snapshot.
	trash, err := os.MkdirTemp(b.tmpDir(), "delete-"+id+"-")
	if err != nil {
		return fmt.Errorf("local: delete snapshot %s: %w", id, err)
	}
	if err := os.Rename(dir, filepath.Join(trash, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		_ = os.Remove(trash)
		return fmt.Errorf("local: delete snapshot %s: %w", id, err)
	}
	if err := removeAll(trash); err != nil {
		return fmt.Errorf("local: delete snapshot %s: remove files: %w", id, err)
	}
	return nil
}

// stopGroup kills the process group led by pid and waits until the leader is gone.
func stopGroup(ctx context.Context, pid int, start uint64) error {
	if err := killGroup(pid); err != nil {
		return err
	}
	return untilNoneLeft(ctx, time.Now().Add(killWait), 20*time.Millisecond, func() error {
		if processAlive(pid, start) {
			return fmt.Errorf("process %d still alive %s after SIGKILL", pid, killWait)
		}
		return nil
	})
}

// untilNoneLeft calls sweep every interval until it reports that nothing is left (nil):
// the wait after a SIGKILL for processes to be gone. Once deadline has passed it returns
// what sweep last reported left; when ctx ends first, ctx's error.
func untilNoneLeft(ctx context.Context, deadline time.Time, every time.Duration, sweep func() error) error {
	for {
		left := sweep()
		if left == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return left
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}
