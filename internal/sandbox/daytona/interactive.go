package daytona

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Commands (Runtime.Exec) run as session commands, interactive or not: the daemon's
// /process/execute runs a command without the request's context and kills it only at its
// own timeout (apps/daemon/pkg/toolbox/process/execute.go, v0.190), so a cancelled turn
// would leave it running; it has no stdin and answers only when the command ends, over
// a request held open for as long as the command runs. A session command can be killed,
// and its output read while it runs. Plain commands (not Interactive) run on sessions the
// runtime keeps (plainexec.go, sessionpool.go); interactive ones as follows:
//
//  1. POST /process/session with a random id, then .../exec {runAsync, suppressInputEcho}
//     with one shell line: a script under /bin/sh given the working directory, the
//     environment and the argv as quoted arguments. An interactive command with Stdin
//     gets interactiveScript; any other gets fileScript, its stdin a file (a plain
//     command's Stdin, uploaded to the work directory first and deleted after) or
//     /dev/null.
//  2. Interactive: each chunk read from Stdin is sent at once as one POST .../input
//     line; the script decodes it (escapeInput) into the command's stdin, so bytes
//     arrive exactly, partial lines included, and EOF of Stdin becomes EOF of the
//     command's stdin, which the daemon alone never gives a session command.
//  3. GET .../logs is polled (JSON, streams apart) and the bytes new since the last
//     poll go to Stdout and Stderr: at once after input was sent, then every pollMin
//     while output flows and for pollActive after output, input or the start, then
//     doubling while the command is quiet, up to pollMax; never more often than a poll
//     takes (against Daytona, a request round trip). On a quiet poll GET
//     .../command/{id} is read for the exit code; the logs read after it appears are
//     complete. So output reaches the writers about pollMin after the daemon logged it
//     while it flows, and within the poll interval (plus a round trip) otherwise; a
//     round trip of a line on the emulator takes 2.5 ms and about 4 requests
//     (BenchmarkInteractiveRoundTrip), a quiet command costs one or two requests per
//     interval.
//  4. At the end, on cancel and on timeout, DELETE of the session kills what the
//     command left (the daemon signals the session shell's process group and every
//     descendant: SIGTERM, then SIGKILL after up to 5 s) and answers once they are gone,
//     so a cancelled Exec returns after the command's processes have ended.
//
// Limits, from the daemon: output reaches the log, and so the writers, a whole line at a
// time (a partial line shows once its newline is written or the command ends); a last
// line without a newline gets one; NUL bytes are dropped and invalid UTF-8 is replaced
// (the logs are JSON text). Each poll reads the whole log, three copies of the output
// in one JSON answer, so an answer over 64 MiB (about 21 MiB of output) stops the
// command with an error wrapping sandbox.ErrTooLarge. Stdin of an interactive command
// costs the script about 5 MB/s (the shell reads its input a byte at a time). The argv
// and environment go through the kernel's exec: 128 KiB per string, 1 MiB in all (as on
// the local backend). The command text (with the environment's values) can be read
// through GET /process/session until the session is deleted, so secrets belong in the
// sandbox's Daytona secrets, never in ExecRequest.Env.
const (
	pollMin = 2 * time.Millisecond
	pollMax = 50 * time.Millisecond
	// plainPollMax is pollMax for a command that is not interactive: nobody waits on
	// its output to answer it, and such commands may run for half an hour.
	plainPollMax = 500 * time.Millisecond
	// pollActive is how long polls stay at pollMin after output or input before they
	// back off: an answer to input usually takes a few milliseconds.
	pollActive = 20 * time.Millisecond
	// inputChunk is the most read from Stdin for one input request.
	inputChunk = 32 << 10
	// inputOpenWait bounds resending input the daemon could not deliver because the
	// command's input pipe did not exist yet (a command that has not started).
	inputOpenWait = 30 * time.Second
	// finalLogsWait bounds reading the logs of a command that timed out, before it is
	// killed.
	finalLogsWait = 5 * time.Second
	// maxArg and maxArgs are what one exec may carry: Linux's MAX_ARG_STRLEN, and the
	// local backend's total.
	maxArg  = 128 << 10
	maxArgs = 1 << 20
)

// interactiveScript runs a command for Runtime.Exec with Interactive and Stdin, as
// `/bin/sh -c interactiveScript sh DIR NAME=VALUE... -- ARGV...`. It makes a
// FIFO for the command's stdin and a relay that reads the daemon's input pipe a line at
// a time: ":" and escaped bytes (escapeInput) are written to the FIFO as they come, any
// other line ends the relay so the command reads EOF. The relay is killed when the
// command ends (it would wait for input forever), and the traps remove the FIFO when
// the session is deleted.
const interactiveScript = `d=$(mktemp -d) || exit 125
r=
trap 'kill $r 2>/dev/null; rm -rf "$d"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
mkfifo "$d/i" || exit 125
exec 3<&0
while IFS= read -r l <&3; do case $l in :*) printf %b "${l#:}";; *) break;; esac; done >"$d/i" 2>/dev/null &
r=$!
exec 3<&- </dev/null
cd "$1" || exit
shift
while [ "$1" != -- ]; do export "$1"; shift; done
shift
"$@" <"$d/i"
c=$?
` + printEnd

// printEnd ends a script: after the command, the end marker (endPlaceholder, replaced by
// the command's own) and the command's exit code as a line "MARKER:CODE" on stdout and
// on stderr, then the exit code. The daemon's read loop ends a command's last line with
// a newline whether it had one or not; with the marker after it, that line is the
// marker's, so logStream, dropping the marker, gives back the streams exactly. Once both
// streams' logs hold their marker line, all the command wrote before it ended is in
// them and its exit code is known: one read of the logs tells a finished command's
// whole result (plainexec.go).
const printEnd = `printf '%s:%d\n' @END@ "$c"
printf '%s:%d\n' @END@ "$c" >&2
exit $c`

// endPlaceholder stands for the end marker in the scripts.
const endPlaceholder = "@END@"

// fileScript runs a command whose stdin is a file (/dev/null for none), as
// `/bin/sh -c fileScript sh DIR FILE NAME=VALUE... -- ARGV...`. Stdin is redirected
// before the environment is exported, so no variable of it changes which file is read.
// The command runs under setsid when the sandbox has it (util-linux and BusyBox do; it
// does not fork, as the script's child is no process group leader): deleting the
// session at the end signals the session shell's process group and the processes
// under it, so a background process the command left (a server started with `&`,
// reparented when its parent ended) survives only outside that group, as it survives
// a command on the local backend; cancel still reaches the command and what runs under
// it, through the daemon's walk of the process tree.
const fileScript = `cd "$1" || exit
exec <"$2" || exit
shift 2
while [ "$1" != -- ]; do export "$1"; shift; done
shift
if command -v setsid >/dev/null 2>&1; then setsid "$@"; else "$@"; fi
c=$?
` + printEnd

// inputEOF is the line that ends the relay.
const inputEOF = "EOF\n"

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// commandLine is the session command line for argv in dir with env: with live, stdin
// is relayed from input requests (interactiveScript), else read from stdinFile
// (fileScript; "" = /dev/null). end is the command's end marker (newEndMarker).
func commandLine(dir string, env map[string]string, argv []string, live bool, stdinFile, end string) (string, error) {
	script, args := interactiveScript, []string{dir}
	if !live {
		if stdinFile == "" {
			stdinFile = "/dev/null"
		}
		script, args = fileScript, append(args, stdinFile)
	}
	script = strings.ReplaceAll(script, endPlaceholder, end)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !envNameRE.MatchString(k) {
			return "", fmt.Errorf("environment variable name %q is not a shell name", k)
		}
		args = append(args, k+"="+env[k])
	}
	args = append(args, "--")
	args = append(args, argv...)
	total := len(script)
	var b strings.Builder
	b.WriteString("/bin/sh -c " + shellQuote(script) + " sh")
	for _, a := range args {
		if len(a) >= maxArg {
			return "", fmt.Errorf("an argument or environment value of %d bytes: one exec takes at most %d", len(a), maxArg-1)
		}
		total += len(a) + 1
		b.WriteString(" " + shellQuote(a))
	}
	if total > maxArgs {
		return "", fmt.Errorf("argv and environment total %d bytes, over the %d allowed", total, maxArgs)
	}
	return b.String(), nil
}

// escapeInput encodes bytes for the relay's printf %b: valid UTF-8 other than control
// characters and backslash as it is, everything else as \0NNN. The line is JSON text
// (so it must be valid UTF-8) and must hold no newline.
func escapeInput(p []byte) string {
	var b strings.Builder
	b.Grow(len(p) + 2)
	for len(p) > 0 {
		r, n := utf8.DecodeRune(p)
		if (r == utf8.RuneError && n <= 1) || r < 0x20 || r == 0x7f || r == '\\' {
			fmt.Fprintf(&b, `\0%03o`, p[0])
			p = p[1:]
			continue
		}
		b.Write(p[:n])
		p = p[n:]
	}
	return b.String()
}

// newEndMarker returns a command's end marker: random, so that no output of the
// command is taken for it, and made of characters a shell script and JSON carry as
// they are.
func newEndMarker() string { return "trueforge-end-" + randHex() + randHex() }

// logStream delivers one stream of a command's log: the bytes past those delivered, in
// whole lines while the command runs, without the end marker's line.
type logStream struct {
	seen, sent int
	end        string // the start of the end marker's line: marker and ":"
	buf        *sandbox.OutputBuffer
	w          io.Writer // the caller's; nil once it failed
	// ended is set once the end marker's line has been read, and code to the exit code
	// it carries.
	ended bool
	code  int
}

// newLogStream delivers a stream to buf and w (nil for none); end is the command's end
// marker.
func newLogStream(end string, outputCap int, w io.Writer) *logStream {
	return &logStream{end: end + ":", buf: sandbox.NewOutputBuffer(outputCap), w: w}
}

// update takes the stream's text so far and delivers what is new (all of it with all,
// else up to its last newline). grew reports a longer text than last time.
func (s *logStream) update(text string, all bool) (grew bool) {
	// The marker comes last, unless a background child of the command writes after it;
	// taking it out leaves the bytes as written either way. The daemon logs whole lines,
	// so a marker in the log has its newline.
	if i := strings.Index(text, s.end); i >= 0 {
		if j := strings.IndexByte(text[i:], '\n'); j >= 0 {
			if code, err := strconv.Atoi(text[i+len(s.end) : i+j]); err == nil {
				s.ended, s.code = true, code
			}
			text = text[:i] + text[i+j+1:]
		}
	}
	if len(text) > s.seen {
		grew, s.seen = true, len(text)
	}
	if len(text) <= s.sent {
		return grew
	}
	next := text[s.sent:]
	if !all {
		i := strings.LastIndexByte(next, '\n')
		if i < 0 {
			return grew
		}
		next = next[:i+1]
	}
	s.sent += len(next)
	s.buf.Write([]byte(next))
	if s.w != nil {
		if _, err := io.WriteString(s.w, next); err != nil {
			s.w = nil
		}
	}
	return grew
}

// session is an interactive command's session.
type session struct {
	r       *Runtime
	sb      *Sandbox
	sid     string
	cmdID   string
	kick    chan struct{} // input was sent: poll soon
	stdinEr chan error    // input could not be sent
}

// execSession runs argv in cwd as a session command (see the top of this file): an
// interactive one on a session of its own, a plain one through execPlain, its stdin read
// from stdinFile in the sandbox ("" = none).
func (r *Runtime) execSession(ctx context.Context, id string, sb *Sandbox, req sandbox.ExecRequest, argv []string, cwd, stdinFile string) (sandbox.ExecResult, error) {
	if !req.Interactive {
		return r.execPlain(ctx, id, sb, req, argv, cwd, stdinFile)
	}
	res := sandbox.ExecResult{ExitCode: -1}
	live := req.Stdin != nil
	end := newEndMarker()
	line, err := commandLine(cwd, req.Env, argv, live, stdinFile, end)
	if err != nil {
		return res, err
	}
	s := &session{r: r, sb: sb, sid: "trueforge-" + randHex(), kick: make(chan struct{}, 1), stdinEr: make(chan error, 1)}
	if err := r.C.CreateSession(ctx, sb, s.sid); err != nil {
		return res, r.toolboxErr(ctx, id, err)
	}
	deleted := false
	deleteSession := func() error {
		if deleted {
			return nil
		}
		deleted = true
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionTimeout)
		defer cancel()
		if err := r.C.DeleteSession(dctx, sb, s.sid); err != nil && !IsNotFound(err) {
			return fmt.Errorf("deleting session %s: %w", s.sid, err)
		}
		return nil
	}
	// Whatever happens below, the session goes and takes what the command left.
	defer func() { _ = deleteSession() }()

	start := time.Now()
	ex, err := r.C.SessionExec(ctx, sb, s.sid, SessionExecuteRequest{Command: line, RunAsync: true, SuppressInputEcho: true})
	if err != nil {
		return res, r.toolboxErr(ctx, id, err)
	}
	s.cmdID = ex.CmdID

	runCtx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	if live {
		// The forwarder may be blocked reading Stdin when Exec returns; fwdCtx keeps it
		// from sending anything after that, and closing Stdin (Exec does, for an
		// io.Closer) releases it.
		fwdCtx, stopFwd := context.WithCancel(runCtx)
		defer stopFwd()
		go s.forward(fwdCtx, req.Stdin)
	}

	out := newLogStream(end, req.OutputCap, req.Stdout)
	errOut := newLogStream(end, req.OutputCap, req.Stderr)
	e := commandEnd{res: &res, start: start, out: out, errOut: errOut}
	code, perr := s.poll(runCtx, out, errOut)
	if perr == nil {
		res.ExitCode = code
		e.finish()
		return res, nil
	}
	return r.endFailed(ctx, runCtx, id, sb, s.sid, s.cmdID, e, perr, deleteSession)
}

// poll delivers the command's output until it exits and returns its exit code; an error
// when ctx ends, input could not be sent, or the toolbox failed.
func (s *session) poll(ctx context.Context, out, errOut *logStream) (int, error) {
	c := s.r.C
	interval, active := pollMin, time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case err := <-s.stdinEr:
			return 0, fmt.Errorf("sending stdin: %w", err)
		case <-s.kick:
			interval, active = pollMin, time.Now()
		case <-timer.C:
		}
		began := time.Now()
		logs, err := c.SessionCommandLogs(ctx, s.sb, s.sid, s.cmdID)
		if err != nil {
			return 0, err
		}
		grew := out.update(logs.Stdout, false)
		grew = errOut.update(logs.Stderr, false) || grew
		if grew {
			interval, active = pollMin, began
		} else {
			cmd, err := c.SessionCommand(ctx, s.sb, s.sid, s.cmdID)
			if err != nil {
				return 0, err
			}
			if cmd.ExitCode != nil {
				// The daemon records the exit code after the output: this read is
				// complete.
				logs, err := c.SessionCommandLogs(ctx, s.sb, s.sid, s.cmdID)
				if err != nil {
					return 0, err
				}
				out.update(logs.Stdout, true)
				errOut.update(logs.Stderr, true)
				return *cmd.ExitCode, nil
			}
			if time.Since(active) > pollActive {
				interval = min(interval*2, pollMax)
			}
		}
		// Never poll more often than a poll takes: a large log costs its transfer.
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(max(interval, time.Since(began)))
	}
}

// forward sends what is read from stdin to the command, a chunk per request, then EOF.
func (s *session) forward(ctx context.Context, stdin io.Reader) {
	buf := make([]byte, inputChunk)
	for {
		n, rerr := stdin.Read(buf)
		if n > 0 {
			if err := s.send(ctx, ":"+escapeInput(buf[:n])+"\n"); err != nil {
				s.fail(ctx, err)
				return
			}
		}
		if rerr != nil {
			// EOF, or a failing reader: either way the command reads EOF, as with a
			// local pipe.
			if err := s.send(ctx, inputEOF); err != nil {
				s.fail(ctx, err)
			}
			return
		}
	}
}

// errEnded: the command ended before its input could be sent; nothing to report.
var errEnded = errors.New("command ended")

// send posts one input line, resending while the daemon says the command's input pipe
// does not exist yet (nothing was written then).
func (s *session) send(ctx context.Context, data string) error {
	wait := pollMin
	deadline := time.Now().Add(inputOpenWait)
	for {
		if ctx.Err() != nil {
			return errEnded
		}
		err := s.r.C.SessionInput(ctx, s.sb, s.sid, s.cmdID, data)
		switch {
		case err == nil:
			select {
			case s.kick <- struct{}{}:
			default:
			}
			return nil
		case IsGone(err), ctx.Err() != nil:
			return errEnded
		case IsInputNotOpen(err) && time.Now().Before(deadline):
			if sleep(ctx, wait) != nil {
				return errEnded
			}
			wait = min(wait*2, 100*time.Millisecond)
		default:
			return err
		}
	}
}

// fail reports an input error to the poll loop, unless the command has ended anyway.
func (s *session) fail(ctx context.Context, err error) {
	if errors.Is(err, errEnded) || ctx.Err() != nil {
		return
	}
	select {
	case s.stdinEr <- err:
	default:
	}
}
