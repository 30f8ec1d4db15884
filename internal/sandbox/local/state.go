package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// logTailBytes is how much of the end of a build log BuildState returns.
const logTailBytes = 4096

// BuildState reports a build from the files in its directory, so any process can ask:
// Ready once the ready marker exists (and its bases still do), Failed with the recorded
// reason, Building while the supervisor lives, and Failed with "build process died" if it
// vanished without recording an outcome. A release is always Ready.
func (b *Builder) BuildState(ctx context.Context, id string) (sandbox.BuildState, error) {
	m, err := b.readMeta(id)
	if err != nil {
		return sandbox.BuildState{}, fmt.Errorf("local: build state of %s: %w", id, err)
	}
	dir := b.snapDir(id)
	var st sandbox.BuildState
	if b.outcome(id, &st) {
		// Every refresh of a Ready environment lands here: its log is not needed.
		if st.Status != sandbox.StatusReady {
			st.LogTail = logTail(filepath.Join(dir, "build.log"))
		}
		return st, nil
	}
	if pid, start, err := readPidFile(filepath.Join(dir, "pid")); err == nil && processAlive(pid, start) {
		st.Status = sandbox.StatusBuilding
		st.LogTail = logTail(filepath.Join(dir, "build.log"))
		return st, nil
	}
	// The supervisor is gone; it may have recorded the outcome just before exiting.
	st.LogTail = logTail(filepath.Join(dir, "build.log"))
	if b.outcome(id, &st) {
		return st, nil
	}
	st.Status, st.Reason = sandbox.StatusFailed, "build process died"
	if data, err := os.ReadFile(filepath.Join(dir, "exit")); err == nil {
		st.Reason += " after the build script exited with status " + strings.TrimSpace(string(data))
	} else if m.Kind == kindRelease {
		st.Reason = "release snapshot is incomplete"
	}
	return st, nil
}

// outcome fills st from a recorded outcome and reports whether there was one.
func (b *Builder) outcome(id string, st *sandbox.BuildState) bool {
	dir := b.snapDir(id)
	if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
		if _, err := b.chain(id); err != nil {
			st.Status, st.Reason = sandbox.StatusFailed, "snapshot can no longer be used: "+err.Error()
			return true
		}
		st.Status = sandbox.StatusReady
		return true
	}
	if data, err := os.ReadFile(filepath.Join(dir, "failed")); err == nil {
		st.Status = sandbox.StatusFailed
		st.Reason = strings.TrimSpace(string(data))
		if st.Reason == "" {
			st.Reason = "build failed"
		}
		return true
	}
	return false
}

// LogTail returns the end of a snapshot's build log (empty when there is none). BuildState
// includes it only for builds that are running or failed.
func (b *Builder) LogTail(id string) string {
	return logTail(filepath.Join(b.snapDir(id), "build.log"))
}

// logTail returns the last logTailBytes of a log, starting at a line boundary when one is
// near, as valid UTF-8. A missing log is empty.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return ""
	}
	off := info.Size() - logTailBytes
	if off < 0 {
		off = 0
	}
	buf := make([]byte, info.Size()-off)
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	buf = buf[:n]
	if off > 0 {
		if i := strings.IndexByte(string(buf), '\n'); i >= 0 && i < len(buf)-1 {
			buf = buf[i+1:]
		}
		for len(buf) > 0 && !utf8.RuneStart(buf[0]) {
			buf = buf[1:]
		}
	}
	return strings.ToValidUTF8(string(buf), "\uFFFD")
}

func readPidFile(path string) (pid int, start uint64, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("malformed pid file %s", path)
	}
	if pid, err = strconv.Atoi(f[0]); err != nil || pid <= 0 {
		return 0, 0, fmt.Errorf("malformed pid file %s", path)
	}
	if start, err = strconv.ParseUint(f[1], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("malformed pid file %s", path)
	}
	return pid, start, nil
}
