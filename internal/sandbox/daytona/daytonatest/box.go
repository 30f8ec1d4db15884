package daytonatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// box runs what a sandbox's toolbox does: commands and file operations. Paths are the
// absolute paths a Daytona client sends.
type box interface {
	create(id string, blockNetwork bool) error
	stop(id string) error
	start(id string) error
	remove(id string) error
	exec(ctx context.Context, id, command, cwd string, env map[string]string, limit time.Duration) (execResult, error)
	// run runs a session command: a shell line with its streams connected as they flow.
	// The end of ctx kills the command's process group; code is then -1.
	run(ctx context.Context, id string, p proc) (code int, err error)
	// write uploads r to path as the daemon's os.Create does: an existing file keeps its
	// mode, a new one gets newFileMode (permissions.go).
	write(id, path string, r io.Reader) error
	// chmod sets path's permission bits (POST /files/permissions, permissions.go).
	chmod(id, path string, mode fs.FileMode) error
	read(id, path string) ([]byte, error)
	stat(id, path string) (fileInfo, error)
	list(id, path string) ([]fileInfo, error)
	del(id, path string, recursive bool) error
	close()
}

type execResult struct {
	code     int
	out      string
	timedOut bool
}

// proc is a session command for box.run.
type proc struct {
	command string
	env     map[string]string
	stdin   *os.File // read end of the command's input pipe
	stdout  io.Writer
	stderr  io.Writer
}

// fileInfo is the toolbox's FileInfo.
type fileInfo struct {
	Name        string `json:"name"`
	Size        int64  `json:"size"`
	Mode        string `json:"mode"`
	Permissions string `json:"permissions"`
	Owner       string `json:"owner"`
	Group       string `json:"group"`
	IsDir       bool   `json:"isDir"`
	ModifiedAt  string `json:"modifiedAt"`
}

// servedDir is the directory whose paths every box serves to file calls and as a cwd: the
// local box's sandboxes serve only their /workspace (box_local_linux.go).
const servedDir = "/workspace"

// served reports whether the clean absolute path p is servedDir or in it.
func served(p string) bool { return p == servedDir || strings.HasPrefix(p, servedDir+"/") }

// errBadPath is a path the box cannot serve (400).
var errBadPath = errors.New("path outside the emulated sandbox")

func toFileInfo(name string, fi fs.FileInfo) fileInfo {
	return fileInfo{Name: name, Size: fi.Size(), Mode: fi.Mode().String(),
		Permissions: fmt.Sprintf("%#o", fi.Mode().Perm()), Owner: "daytona", Group: "daytona",
		IsDir: fi.IsDir(), ModifiedAt: fi.ModTime().UTC().Format(time.RFC3339Nano)}
}

// hostBox is the fallback when bubblewrap is not installed: commands run with /bin/sh on
// the host in a per-sandbox directory (not confined beyond their cwd), and absolute paths
// of file calls are mapped into that directory.
type hostBox struct{ root string }

func (h hostBox) dir(id string) string { return filepath.Join(h.root, "sandboxes", id) }

// inside maps a sandbox path (absolute or relative to the root) into dir.
func inside(dir, p string) string {
	return filepath.Join(dir, filepath.Clean("/"+p))
}

func (h hostBox) create(id string, _ bool) error { return os.MkdirAll(h.dir(id), 0o755) }
func (h hostBox) stop(string) error              { return nil }
func (h hostBox) start(string) error             { return nil }
func (h hostBox) remove(id string) error         { return os.RemoveAll(h.dir(id)) }
func (h hostBox) close()                         {}

func (h hostBox) exec(ctx context.Context, id, command, cwd string, env map[string]string, limit time.Duration) (execResult, error) {
	dir := h.dir(id)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh")
	cmd.Stdin = strings.NewReader(command)
	cmd.Dir = dir
	if cwd != "" {
		cmd.Dir = inside(dir, cwd)
	}
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	killGroup(cmd)
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return execResult{timedOut: true, out: out.String()}, nil
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return execResult{code: ee.ExitCode(), out: out.String()}, nil
	case err != nil:
		return execResult{}, err
	}
	return execResult{out: out.String()}, nil
}

func (h hostBox) run(ctx context.Context, id string, p proc) (int, error) {
	dir := h.dir(id)
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", p.command)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for k, v := range p.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.stdin, p.stdout, p.stderr
	// A background process still holding the output pipes cannot keep the command
	// running past its end for long.
	cmd.WaitDelay = time.Second
	killGroup(cmd)
	err := cmd.Run()
	if ctx.Err() != nil {
		return -1, nil //nolint:nilerr // cancelled: -1, as a killed command exits
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	return 0, err
}

func (h hostBox) write(id, p string, r io.Reader) error {
	dst := inside(h.dir(id), p)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	_, statErr := os.Lstat(dst)
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && errors.Is(statErr, fs.ErrNotExist) {
		// os.Create applied this process's umask; the daemon's is 0022.
		err = os.Chmod(dst, newFileMode)
	}
	return err
}

func (h hostBox) chmod(id, p string, mode fs.FileMode) error {
	return os.Chmod(inside(h.dir(id), p), mode)
}

func (h hostBox) read(id, p string) ([]byte, error) { return os.ReadFile(inside(h.dir(id), p)) }

func (h hostBox) stat(id, p string) (fileInfo, error) {
	fi, err := os.Stat(inside(h.dir(id), p))
	if err != nil {
		return fileInfo{}, err
	}
	return toFileInfo(fi.Name(), fi), nil
}

func (h hostBox) list(id, p string) ([]fileInfo, error) {
	entries, err := os.ReadDir(inside(h.dir(id), p))
	if err != nil {
		return nil, err
	}
	out := []fileInfo{}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			out = append(out, toFileInfo(e.Name(), fi))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (h hostBox) del(id, p string, recursive bool) error {
	dst := inside(h.dir(id), p)
	if _, err := os.Lstat(dst); err != nil {
		return err
	}
	if recursive {
		return os.RemoveAll(dst)
	}
	return os.Remove(dst)
}

// findExecutable looks name up in PATH and the system directories.
func findExecutable(name string) (string, error) {
	if p := sandbox.FindProgram(name); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("%s not found", name)
}

// sandboxBox returns the box sandboxes run in, choosing it on first use: local
// (bubblewrap) sandboxes when the tools are installed, else host processes. Called with
// mu held.
func (s *Server) sandboxBox() (box, error) {
	if s.bx != nil || s.bxErr != nil {
		return s.bx, s.bxErr
	}
	if bx, ok, err := newLocalBox(s.root); ok {
		s.bx, s.bxErr = bx, err
		s.local = err == nil
		return s.bx, s.bxErr
	}
	s.bx = hostBox{root: s.root}
	return s.bx, nil
}
