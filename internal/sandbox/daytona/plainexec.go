package daytona

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Plain commands (Runtime.Exec without Interactive) run as async session commands, as
// interactive ones do (interactive.go), but on a session lent by the sandbox's pool
// (sessionpool.go), and are read mostly through their logs:
//
//  1. POST .../exec {runAsync} on an idle session of the pool (a session is created
//     first only when none is idle: the sandbox's first command, or one run beside
//     others).
//  2. After plainFirstPoll, GET .../logs and GET .../command/{id} (the exit code) at
//     once; then GET .../logs at growing intervals. The script prints the end marker
//     with the command's exit code on stdout and on stderr after the command
//     (printEnd), and the daemon logs each stream in order, so logs that hold both
//     markers have the whole output and the exit code. A short command costs these
//     three requests in two round trips (BenchmarkExecRoundTrip: 3.0 requests and
//     1.9 times /process/execute's time at a 20 ms round trip). A command still
//     running after plainExitCheck, or whose logs outgrow plainLogPollMax, is polled by
//     its exit code instead unless its output streams to Stdout or Stderr, and its logs
//     read once it has ended.
//  3. The session goes back to the pool once the daemon has recorded the command's exit
//     code: read with the first logs for a short command, else read after the markers
//     (waitExitCode). Nothing runs after Exec returns.
//
// Cancel and timeout delete the command's session, which kills the command and what runs
// under it (the daemon signals the session's process group and every descendant), and
// answers once they are gone; no other command shares the session.
const (
	// plainFirstPoll is the wait from a plain command's exec to the first read of its
	// logs: on the emulator a short command takes about this long; against Daytona the
	// exec's round trip is longer, and the read follows its answer at once.
	plainFirstPoll = 4 * time.Millisecond
	// plainExitCheck is how long a plain command's logs are polled before its exit code
	// is too: it also tells the end of a script killed before it printed its markers.
	plainExitCheck = time.Second
	// plainLogPollMax is the size of the logs above which a command whose output does
	// not stream is polled by its exit code: each read of the logs carries them whole.
	plainLogPollMax = 256 << 10
)

// execPlain runs argv in cwd as a session command of the pool, its stdin read from
// stdinFile in the sandbox ("" = none).
func (r *Runtime) execPlain(ctx context.Context, id string, sb *Sandbox, req sandbox.ExecRequest, argv []string, cwd, stdinFile string) (sandbox.ExecResult, error) {
	res := sandbox.ExecResult{ExitCode: -1}
	end := newEndMarker()
	line, err := commandLine(cwd, req.Env, argv, false, stdinFile, end)
	if err != nil {
		return res, err
	}
	start := time.Now()
	s, cmdID, err := r.startPlain(ctx, id, sb, line)
	if err != nil {
		return res, r.toolboxErr(ctx, id, err)
	}
	runCtx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	out := newLogStream(end, req.OutputCap, req.Stdout)
	errOut := newLogStream(end, req.OutputCap, req.Stderr)
	e := commandEnd{res: &res, start: start, out: out, errOut: errOut}
	kill := func() error {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionTimeout)
		defer cancel()
		if err := r.C.DeleteSession(dctx, sb, s.id); err != nil && !IsNotFound(err) {
			return fmt.Errorf("deleting session %s: %w", s.id, err)
		}
		return nil
	}
	stream := req.Stdout != nil || req.Stderr != nil
	code, logged, free, perr := r.pollPlain(runCtx, sb, s.id, cmdID, start, stream, out, errOut)
	if perr == nil {
		res.ExitCode = code
		e.finish()
		if free {
			s.uses++
			s.log += logged
			r.putSession(ctx, id, sb, s)
		}
		return res, nil
	}
	return r.endFailed(ctx, runCtx, id, sb, s.id, cmdID, e, perr, kill)
}

// commandEnd is what a session command's result is made of once it ends: its output
// so far and when it started.
type commandEnd struct {
	res         *sandbox.ExecResult
	start       time.Time
	out, errOut *logStream
}

// finish puts the duration and the kept output into the result.
func (e commandEnd) finish() {
	e.res.Duration = time.Since(e.start)
	var t bool
	e.res.Stdout, e.res.Truncated = e.out.buf.Bytes()
	e.res.Stderr, t = e.errOut.buf.Bytes()
	e.res.Truncated = e.res.Truncated || t
}

// endFailed ends session command cmdID of session sid, whose polling failed with perr,
// for the plain and the interactive exec alike: kill deletes the session (and with it
// the command). Cancelled (ctx), the command is stopped first and the output it printed
// since the last read is not fetched; timed out (runCtx), what it printed until now is
// fetched, then it is killed (exit 124); else the session's error (sessionErr).
func (r *Runtime) endFailed(ctx, runCtx context.Context, id string, sb *Sandbox, sid, cmdID string, e commandEnd, perr error, kill func() error) (sandbox.ExecResult, error) {
	switch {
	case ctx.Err() != nil:
		derr := kill()
		e.finish()
		return *e.res, errors.Join(ctx.Err(), derr)
	case runCtx.Err() != nil:
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalLogsWait)
		if logs, err := r.C.SessionCommandLogs(lctx, sb, sid, cmdID); err == nil {
			e.out.update(logs.Stdout, true)
			e.errOut.update(logs.Stderr, true)
		}
		cancel()
		derr := kill()
		e.finish()
		e.res.ExitCode, e.res.TimedOut, e.res.Limit = 124, true, sandbox.LimitTimeout
		return *e.res, derr
	}
	derr := kill()
	e.finish()
	return *e.res, r.sessionErr(ctx, id, sid, perr, derr)
}

// sessionErr is the error of a session command whose polling failed with perr, after
// its session was deleted (derr).
func (r *Runtime) sessionErr(ctx context.Context, id, sid string, perr, derr error) error {
	perr = r.toolboxErr(ctx, id, perr)
	switch {
	case errors.Is(perr, sandbox.ErrStopped):
		// Stopped underneath: the command ended with the sandbox, as on the local
		// backend (exit code -1, no error).
		return nil
	case IsNotFound(perr) && !errors.Is(perr, sandbox.ErrLost):
		// The sandbox is there but the session is not: the daemon restarted and took
		// the command with it. Not ErrNotFound, which would say the sandbox is gone.
		return fmt.Errorf("%w: the command's session %s is gone (%v)", sandbox.ErrLost, sid, perr)
	}
	return errors.Join(perr, derr)
}

// startPlain starts the command line on a session of the pool and returns the session
// and the command's id.
func (r *Runtime) startPlain(ctx context.Context, id string, sb *Sandbox, line string) (pooledSession, string, error) {
	s, fresh, err := r.acquireSession(ctx, id, sb)
	if err != nil {
		return s, "", err
	}
	exec := SessionExecuteRequest{Command: line, RunAsync: true, SuppressInputEcho: true}
	ex, err := r.C.SessionExec(ctx, sb, s.id, exec)
	if IsNotFound(err) && !fresh {
		// The pooled session went with a restart of the sandbox, and so did the others
		// idle: nothing ran, so start over on a new session.
		r.pool.reset(id)
		if s, _, err = r.acquireSession(ctx, id, sb); err != nil {
			return s, "", err
		}
		ex, err = r.C.SessionExec(ctx, sb, s.id, exec)
	}
	if err != nil {
		// An exec whose answer was lost may have started the command: the session goes
		// with it.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionTimeout)
		defer cancel()
		_ = r.C.DeleteSession(dctx, sb, s.id)
		return s, "", err
	}
	return s, ex.CmdID, nil
}

// pollPlain reads the logs of the command started at started until both end markers
// are in them (or its exit code is known and the logs read after it), delivering output
// as it comes when stream is set, and returns the exit code, the size of the logs, and
// whether the daemon has recorded the exit code (the session is free again); an error
// when ctx ends or the toolbox fails. The first read of the logs goes with a read of the exit code, so that a
// short command costs these two requests, made at once, after its start.
func (r *Runtime) pollPlain(ctx context.Context, sb *Sandbox, sid, cmdID string, started time.Time, stream bool, out, errOut *logStream) (code, logged int, free bool, err error) {
	c := r.C
	interval, active := pollMin, started
	// The first read comes plainFirstPoll after the exec was sent, at once when its
	// answer took that long: the command has had a round trip to run by the time the
	// read reaches the daemon.
	wait := plainFirstPoll - time.Since(started)
	var exit *int     // the exit code, once read
	byCode := false   // poll the exit code, and read the logs once it is known
	checkExit := true // read the exit code with the logs this time
	for {
		if err := sleep(ctx, wait); err != nil {
			return 0, 0, false, err
		}
		began := time.Now()
		var logs *SessionLogs
		switch {
		case exit == nil && byCode:
			cmd, err := c.SessionCommand(ctx, sb, sid, cmdID)
			if err != nil {
				return 0, 0, false, err
			}
			exit = cmd.ExitCode
		case exit == nil && checkExit:
			if exit, logs, err = r.readBoth(ctx, sb, sid, cmdID); err != nil {
				return 0, 0, false, err
			}
			if exit != nil && !hasEnd(logs, out, errOut) {
				// These logs may have been read before the command ended: read them
				// again below.
				logs = nil
			}
		}
		if logs == nil && (exit != nil || !byCode) {
			// With the exit code known, these logs are complete: the daemon records it
			// after the output.
			if logs, err = c.SessionCommandLogs(ctx, sb, sid, cmdID); err != nil {
				return 0, 0, false, err
			}
		}
		grew := false
		if logs != nil {
			logged = len(logs.Stdout) + len(logs.Stderr)
			grew = out.update(logs.Stdout, false)
			grew = errOut.update(logs.Stderr, false) || grew
			if out.ended && errOut.ended || exit != nil {
				out.update(logs.Stdout, true)
				errOut.update(logs.Stderr, true)
			}
			switch {
			case out.ended && errOut.ended:
				return out.code, logged, exit != nil || r.waitExitCode(ctx, sb, sid, cmdID), nil
			case exit != nil:
				// Ended without its end markers: the script was killed (by the
				// command, or by the kernel's OOM killer).
				return *exit, logged, true, nil
			}
		}
		long := time.Since(started) > plainExitCheck
		byCode = !stream && (long || logged > plainLogPollMax)
		checkExit = stream && long && !grew
		if stream && grew {
			interval, active = pollMin, began
		}
		// Never poll more often than a poll takes: a large log costs its transfer.
		wait = max(interval, time.Since(began))
		if !stream || time.Since(active) > pollActive {
			interval = min(interval*2, plainPollMax)
		}
	}
}

// hasEnd reports whether logs hold the end markers of both streams.
func hasEnd(logs *SessionLogs, out, errOut *logStream) bool {
	return strings.Contains(logs.Stdout, out.end) && strings.Contains(logs.Stderr, errOut.end)
}

// readBoth reads the command's exit code and its logs at once (two requests in
// parallel, one round trip).
func (r *Runtime) readBoth(ctx context.Context, sb *Sandbox, sid, cmdID string) (*int, *SessionLogs, error) {
	type answer struct {
		cmd *SessionCommand
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		cmd, err := r.C.SessionCommand(ctx, sb, sid, cmdID)
		ch <- answer{cmd, err}
	}()
	logs, lerr := r.C.SessionCommandLogs(ctx, sb, sid, cmdID)
	a := <-ch
	if err := errors.Join(lerr, a.err); err != nil {
		return nil, nil, err
	}
	return a.cmd.ExitCode, logs, nil
}

// waitExitCode waits for the daemon to record the exit code of a command whose end
// markers are logged: its wrapper does a moment later, unless a background process the
// command left holds its output open (then false, after exitCodeWaits).
func (r *Runtime) waitExitCode(ctx context.Context, sb *Sandbox, sid, cmdID string) bool {
	for _, wait := range exitCodeWaits {
		if sleep(ctx, wait) != nil {
			return false
		}
		cmd, err := r.C.SessionCommand(ctx, sb, sid, cmdID)
		if err != nil {
			return false
		}
		if cmd.ExitCode != nil {
			return true
		}
	}
	return false
}

// exitCodeWaits are the waits before each read of waitExitCode, 85 ms in all: the
// daemon's wrapper records the exit code within a few milliseconds of the markers.
var exitCodeWaits = []time.Duration{time.Millisecond, 4 * time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond}
