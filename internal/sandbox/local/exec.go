//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// pipeDrain bounds how long Exec waits for the output pipes once the command has ended
// (or was killed): a process that escaped holding them cannot hang the caller.
const pipeDrain = 2 * time.Second

// maxArgs caps argv and environment of a command together (Linux allows about 2 MiB).
const maxArgs = 1 << 20

// Exec runs one command in the sandbox (started by its init, in the sandbox's namespaces)
// and returns once it has ended. When ctx ends or the timeout passes, the command's whole
// process group is killed and Exec returns the output so far with TimedOut (timeout,
// exit code 124) or ctx's error. Processes that left the group (setsid, daemons) keep
// running in the sandbox until Stop, as on any machine.
//
// Every command is interactive in the sense of ExecRequest.Interactive: Stdin is copied
// into the command's stdin pipe chunk by chunk as it is read, and Stdout and Stderr get
// each read of the command's pipes at once (no latency beyond the pipe's). Interactive
// adds only that Exec closes Stdin (if an io.Closer) before it returns.
func (r *Runtime) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if c, ok := req.Stdin.(io.Closer); ok && req.Interactive {
		// The copying goroutine may be blocked reading it; closing releases it and
		// the caller's writer.
		defer c.Close()
	}
	res, err := r.exec(ctx, id, req)
	if err != nil {
		return res, fmt.Errorf("local: exec in sandbox %s: %w", id, err)
	}
	return res, nil
}

func (r *Runtime) exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	var res sandbox.ExecResult
	argv, err := req.Command()
	if err != nil {
		return res, err
	}
	cwd, err := req.WorkingDir()
	if err != nil {
		return res, err
	}
	if err := checkEnv(req.Env); err != nil {
		return res, err
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
	rec, err := r.readRecord(id)
	if err != nil {
		return res, err
	}
	if rec.Status != sandbox.SandboxRunning {
		return res, sandbox.ErrStopped
	}
	env := map[string]string{"PATH": sandboxPath, "HOME": "/workspace"}
	for k, v := range rec.Env {
		env[k] = v
	}
	for k, v := range req.Env {
		env[k] = v
	}
	argv = r.limits.wrap(argv, rec.Limits)
	size := 0
	for _, a := range argv {
		size += len(a) + 1
	}
	for k, v := range env {
		size += len(k) + len(v) + 2
	}
	if size > maxArgs {
		return res, fmt.Errorf("argv and environment total %d bytes, over the %d allowed", size, maxArgs)
	}

	parent := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	conn, err := r.connect(ctx, id, rec)
	if err != nil {
		return res, err
	}
	defer conn.Close()
	before := r.limits.events(id)

	// The command's stdio: pipes whose far ends go to the init with the request.
	stdout, stderr := sandbox.NewOutputBuffer(req.OutputCap), sandbox.NewOutputBuffer(req.OutputCap)
	outR, outW, err := os.Pipe()
	if err != nil {
		return res, err
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return res, err
	}
	defer errR.Close()
	send := []*os.File{outW, errW}
	var inW *os.File
	if req.Stdin != nil {
		var inR *os.File
		inR, inW, err = os.Pipe()
		if err != nil {
			outW.Close()
			errW.Close()
			return res, err
		}
		defer inW.Close()
		send = []*os.File{inR, outW, errW}
	}
	began := time.Now()
	err = writeFrame(conn, execRequest{Argv: argv, Env: sortedEnv(env), Dir: cwd, Stdin: req.Stdin != nil}, send)
	closeAll(send) // ours; the init has its own copies now
	if err != nil {
		return res, r.lostOr(id, fmt.Errorf("send command to the sandbox init: %w", err))
	}
	unlock()
	unlock = nil

	var copies sync.WaitGroup
	copies.Add(2)
	go func() { defer copies.Done(); pump(outR, stdout, req.Stdout) }()
	go func() { defer copies.Done(); pump(errR, stderr, req.Stderr) }()
	if inW != nil {
		go func() {
			_, _ = io.Copy(inW, req.Stdin)
			inW.Close()
		}()
	}

	finals := make(chan initReply, 1)
	readErr := make(chan error, 1)
	go func() {
		for {
			var rep initReply
			if _, err := readFrame(conn, &rep, 0); err != nil {
				readErr <- err
				return
			}
			if rep.Pid == 0 || rep.Exited || rep.Signal != 0 || rep.Killed || rep.Error != "" {
				finals <- rep
				return
			}
		}
	}()

	var final *initReply
	var lost error
	killSent := false
	for final == nil && lost == nil {
		var done <-chan struct{}
		if !killSent {
			done = ctx.Done()
		}
		select {
		case rep := <-finals:
			final = &rep
		case err := <-readErr:
			lost = err
		case <-done:
			killSent = true
			if err := writeFrame(conn, hostMsg{Kill: true}, nil); err != nil {
				lost = err
				break
			}
			// The init answers once the group is gone; if it does not, the sandbox is
			// wedged: the connection is closed and the sandbox stopped whole below.
			timer := time.AfterFunc(r.killWait(), func() { conn.Close() })
			defer timer.Stop()
		}
	}
	// Drain the pipes: a process that escaped holding them cannot hang the caller.
	drained := make(chan struct{})
	go func() { copies.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(pipeDrain):
		outR.Close()
		errR.Close()
		<-drained
	}
	res.Duration = time.Since(began)
	res.Stdout, res.Truncated = stdout.Bytes()
	var t bool
	res.Stderr, t = stderr.Bytes()
	res.Truncated = res.Truncated || t
	res.ExitCode = -1

	if lost != nil {
		if killSent {
			// No answer to the kill: take the whole sandbox down rather than leave a
			// command running that the caller believes killed.
			_ = r.stopKeeper(context.Background(), id)
		}
		if err := r.lostOr(id, lost); !errors.Is(err, errStoppedUnderneath) {
			return res, err
		}
		if err := parent.Err(); err != nil {
			return res, err
		}
		return res, nil // Stop killed it: exit code -1
	}
	if final.Exited {
		res.ExitCode = final.Exit
	} else if final.Signal != 0 {
		res.ExitCode = 128 + final.Signal
	}
	if final.Killed {
		res.ExitCode = -1
		if final.Error != "" {
			return res, errors.New(final.Error)
		}
	}
	res.Limit = r.limits.hit(id, before, res.Stderr, r.dataDir(id), res.ExitCode)
	if killSent {
		if err := parent.Err(); err != nil {
			return res, err
		}
		res.TimedOut, res.ExitCode = true, 124
		if res.Limit == "" {
			res.Limit = sandbox.LimitTimeout
		}
	}
	return res, nil
}

// errStoppedUnderneath: the sandbox was stopped (or archived, deleted) while a command
// ran; the command ends with exit code -1 and no error.
var errStoppedUnderneath = errors.New("sandbox stopped")

// lostOr explains a broken control connection: errStoppedUnderneath when the sandbox was
// stopped in the meantime, ErrLost when its keeper died on its own.
func (r *Runtime) lostOr(id string, err error) error {
	rec, rerr := r.readRecord(id)
	if rerr != nil {
		if errors.Is(rerr, sandbox.ErrNotFound) {
			return errStoppedUnderneath
		}
		return rerr
	}
	if rec.Status != sandbox.SandboxRunning {
		return errStoppedUnderneath
	}
	return fmt.Errorf("%w: the sandbox's processes died (%v); %s", sandbox.ErrLost, err, r.keeperLogTail(id))
}

// pump copies a command's stream into its retained buffer and, if set, the caller's
// writer. A failing writer stops getting data; the buffer still does.
func pump(src io.Reader, buf *sandbox.OutputBuffer, w io.Writer) {
	b := make([]byte, 32<<10)
	for {
		n, err := src.Read(b)
		if n > 0 {
			buf.Write(b[:n])
			if w != nil {
				if _, werr := w.Write(b[:n]); werr != nil {
					w = nil
				}
			}
		}
		if err != nil {
			return
		}
	}
}
