//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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
	argv, cwd, err := req.Invocation()
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
	env, argv, err := r.commandOf(rec, req, argv)
	if err != nil {
		return res, err
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

	stdout, stderr := sandbox.NewOutputBuffer(req.OutputCap), sandbox.NewOutputBuffer(req.OutputCap)
	pipes, err := newCmdPipes(req.Stdin != nil)
	if err != nil {
		return res, err
	}
	defer pipes.close()
	outR, errR, inW := pipes.outR, pipes.errR, pipes.inW
	began := time.Now()
	err = writeFrame(conn, execRequest{Argv: argv, Env: sortedEnv(env), Dir: cwd, Stdin: req.Stdin != nil}, pipes.send)
	closeAll(pipes.send) // ours; the init has its own copies now
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

	final, lost, killSent := r.awaitEnd(ctx, conn)
	pipes.drain(&copies)
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
	res.ExitCode = final.exitCode()
	if final.Killed && final.Error != "" {
		return res, errors.New(final.Error)
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

// cmdPipes are a command's stdio: pipes whose far ends (send: stdin's read end if any,
// stdout's and stderr's write ends) go to the init with the request; ours are the rest.
type cmdPipes struct {
	outR, errR, inW *os.File
	send            []*os.File
}

func newCmdPipes(stdin bool) (*cmdPipes, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll([]*os.File{outR, outW})
		return nil, err
	}
	p := &cmdPipes{outR: outR, errR: errR, send: []*os.File{outW, errW}}
	if stdin {
		inR, inW, err := os.Pipe()
		if err != nil {
			closeAll([]*os.File{outR, outW, errR, errW})
			return nil, err
		}
		p.inW, p.send = inW, []*os.File{inR, outW, errW}
	}
	return p, nil
}

// drain waits for copies, the copying of the command's output, for at most pipeDrain:
// then it closes the read ends, so that a process that escaped holding the pipes cannot
// hang the caller.
func (p *cmdPipes) drain(copies *sync.WaitGroup) {
	drained := make(chan struct{})
	go func() { copies.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(pipeDrain):
		p.outR.Close()
		p.errR.Close()
		<-drained
	}
}

// close closes our ends (the far ends are closed once sent).
func (p *cmdPipes) close() {
	p.outR.Close()
	p.errR.Close()
	if p.inW != nil {
		p.inW.Close()
	}
}

// commandOf is the environment and argv a command of req runs with in the sandbox of
// rec: the sandbox's env under the request's, argv wrapped in the sandbox's limits; both
// together at most maxArgs bytes.
func (r *Runtime) commandOf(rec record, req sandbox.ExecRequest, argv []string) (map[string]string, []string, error) {
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
		return nil, nil, fmt.Errorf("argv and environment total %d bytes, over the %d allowed", size, maxArgs)
	}
	return env, argv, nil
}

// awaitEnd waits for the init's final reply on conn (final), or the connection's end
// (lost). The end of ctx sends the init a kill once (killSent); if the init does not
// answer it within killWait, the sandbox is wedged: the connection is closed, and the
// caller stops the sandbox whole.
func (r *Runtime) awaitEnd(ctx context.Context, conn *net.UnixConn) (final *initReply, lost error, killSent bool) {
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
			timer := time.AfterFunc(r.killWait(), func() { conn.Close() })
			defer timer.Stop()
		}
	}
	return final, lost, killSent
}

// exitCode is the command's exit code as the init reports its end: its status, 128 plus
// a signal, or -1 for a command killed (or that never ran).
func (rep *initReply) exitCode() int {
	switch {
	case rep.Killed:
		return -1
	case rep.Exited:
		return rep.Exit
	case rep.Signal != 0:
		return 128 + rep.Signal
	}
	return -1
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
