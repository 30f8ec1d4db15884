package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
)

// What every runtime does the same way with a request, kept here once: the command's
// argv, its working directory, a workspace path, and the retained output.

// WorkspaceDir is the sandbox's workspace as commands see it.
const WorkspaceDir = "/workspace"

// Command is the request's command as argv: Shell runs with /bin/sh -c. Both or neither
// given is an error, and so is a NUL byte, which no argv can carry.
func (r ExecRequest) Command() ([]string, error) {
	argv := r.Argv
	switch {
	case r.Shell != "" && len(argv) > 0:
		return nil, errors.New("both argv and shell given")
	case r.Shell != "":
		argv = []string{"/bin/sh", "-c", r.Shell}
	case len(argv) == 0 || argv[0] == "":
		return nil, errors.New("no command given")
	}
	for _, a := range argv {
		if strings.ContainsRune(a, 0) {
			return nil, errors.New("argv contains a NUL byte")
		}
	}
	return argv, nil
}

// WorkingDir is the request's working directory inside the sandbox: the workspace when
// Cwd is empty, Cwd below the workspace when it is relative (dot-dots stop at the
// workspace), Cwd itself when it is absolute.
func (r ExecRequest) WorkingDir() (string, error) {
	if strings.ContainsRune(r.Cwd, 0) {
		return "", fmt.Errorf("working directory %q contains a NUL byte", r.Cwd)
	}
	if path.IsAbs(r.Cwd) {
		return path.Clean(r.Cwd), nil
	}
	return path.Join(WorkspaceDir, path.Clean("/"+r.Cwd)), nil
}

// Invocation is what a runtime runs for the request: its argv (Command) and its working
// directory (WorkingDir), or the first error of the two.
func (r ExecRequest) Invocation() (argv []string, cwd string, err error) {
	if argv, err = r.Command(); err != nil {
		return nil, "", err
	}
	if cwd, err = r.WorkingDir(); err != nil {
		return nil, "", err
	}
	return argv, cwd, nil
}

// WorkspacePath turns a file path given relative to the workspace or as /workspace/...
// into a clean relative one ("." for the workspace itself); dot-dots stop at the
// workspace, and an absolute path elsewhere is an error. File operations reach nothing
// outside the workspace through it.
func WorkspacePath(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("invalid path %q", p)
	}
	if path.IsAbs(p) {
		c := path.Clean(p)
		if c != WorkspaceDir && !strings.HasPrefix(c, WorkspaceDir+"/") {
			return "", fmt.Errorf("path %q is %w", p, ErrOutsideWorkspace)
		}
		p = strings.TrimPrefix(strings.TrimPrefix(c, WorkspaceDir), "/")
	}
	p = path.Clean("/" + p)[1:]
	if p == "" {
		p = "."
	}
	return p, nil
}

// OutputBuffer keeps the first half and the last half of a stream up to its capacity
// (ExecRequest.OutputCap) and counts what it dropped in between. It is safe for
// concurrent use.
type OutputBuffer struct {
	mu      sync.Mutex
	headCap int
	tailCap int
	head    []byte
	tail    []byte // the last tailCap bytes are the tail
	total   int64
}

// NewOutputBuffer returns a buffer retaining capacity bytes (DefaultOutputCap when 0).
func NewOutputBuffer(capacity int) *OutputBuffer {
	if capacity <= 0 {
		capacity = DefaultOutputCap
	}
	return &OutputBuffer{headCap: capacity / 2, tailCap: capacity - capacity/2}
}

func (c *OutputBuffer) Write(p []byte) (int, error) {
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

// Bytes returns the retained output, with a marker line where bytes were dropped, and
// whether any were.
func (c *OutputBuffer) Bytes() ([]byte, bool) {
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
