package daytonatest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Session commands, as the v0.190 daemon runs them (apps/daemon/pkg/session):
//
//   - A session runs its commands one after another, in the order they were sent; an
//     async exec answers 202 {cmdId} at once, a sync one 200 with the output when the
//     command ends.
//   - An async command's stdin stays open until it ends (the daemon's holder process),
//     so it never sees EOF; a sync command's stdin is at EOF from the start.
//   - Input (POST .../input, non-empty data) gets a newline appended when it lacks one
//     and is echoed into the log as stdout unless suppressInputEcho; input for a command
//     that has not started answers 500 "failed to open input pipe", for one that has
//     ended 410.
//   - Output is logged a line at a time behind 3-byte stream markers (a last line
//     without a newline gets one, NUL bytes are dropped); the exit code appears after
//     the output is logged.
//   - Logs and sync exec answers depend on X-Daytona-SDK-Version (logFormat).
//   - DELETE kills the session's processes (each command's whole process group, and
//     on Linux the process tree under each running command, which reaches processes
//     that left the group with setsid, as the daemon's signalProcessTree does in
//     apps/daemon/pkg/session/delete.go) and answers when they are gone; stopping or
//     deleting the sandbox ends its sessions.
//
//   - An exec on a session that does not exist answers 404 "session not found" and runs
//     nothing (apps/daemon/pkg/session/execute.go), as after a restart of the daemon;
//     the daytona package's session pool starts the command again on a new session.
//
// Differences: commands do not share a shell (cd and variables do not carry from one
// command of a session to the next), DELETE sends SIGKILL at once where the daemon
// sends SIGTERM and waits up to 5 s before SIGKILL, and a background process still
// holding a command's stdout or stderr delays its exit code by at most a second (box.go's
// WaitDelay) where the daemon's wrapper waits for it to close them (execute.go's
// cmdWrapperFormat waits for its labellers), and the session with it.

// The daemon's stream markers in a command's log.
var (
	stdoutMarker = []byte{1, 1, 1}
	stderrMarker = []byte{2, 2, 2}
)

// sessionKillWait bounds how long DELETE waits for a session's command to die.
const sessionKillWait = 10 * time.Second

type tbSession struct {
	id, sandbox string
	ctx         context.Context
	cancel      context.CancelFunc
	queue       chan *tbCommand // unbounded in practice: see exec
	runnerDone  chan struct{}
	// ending is set when the session is being deleted: a command killed by it gets no
	// exit code, as with the daemon.
	ending atomic.Bool

	mu       sync.Mutex // guards the commands' mutable fields
	commands []*tbCommand
}

type tbCommand struct {
	id, text     string
	suppressEcho bool
	async        bool
	env          map[string]string

	// Guarded by the session's mu.
	started  bool
	input    *os.File // write end of the command's stdin; nil before start and after end
	log      []byte
	exitCode *int
	done     chan struct{} // closed when exitCode is set (or the session ended)
}

// sessionsOf returns the sessions of the sandbox (all when sandbox is ""). Called with
// smu held.
func (s *Server) sessionsOf(sandbox string) []*tbSession {
	var out []*tbSession
	for _, ss := range s.sessions {
		if sandbox == "" || ss.sandbox == sandbox {
			out = append(out, ss)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// endSessions kills and forgets the sandbox's sessions (every session when sandbox is
// "") and, with wait, waits for their commands to die. Safe with mu held: the session
// goroutines never take it.
func (s *Server) endSessions(sandbox string, wait bool) {
	s.smu.Lock()
	list := s.sessionsOf(sandbox)
	for _, ss := range list {
		delete(s.sessions, sessionKey(ss.sandbox, ss.id))
		ss.cancel()
	}
	s.smu.Unlock()
	for _, ss := range list {
		ss.killTrees(wait)
	}
	if !wait {
		return
	}
	for _, ss := range list {
		select {
		case <-ss.runnerDone:
		case <-time.After(sessionKillWait):
		}
	}
}

func sessionKey(sandbox, id string) string { return sandbox + "\x00" + id }

// Sessions returns the ids of a sandbox's live sessions, sorted (none for a sandbox that
// does not exist).
func (s *Server) Sessions(idOrName string) []string {
	s.mu.Lock()
	sb := s.findSandbox(idOrName)
	s.mu.Unlock()
	if sb == nil {
		return nil
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	var ids []string
	for _, ss := range s.sessionsOf(sb.ID) {
		ids = append(ids, ss.id)
	}
	return ids
}

// sessionTarget resolves the started sandbox's id and environment and the session of a
// session call.
func (s *Server) sessionTarget(w http.ResponseWriter, r *http.Request) (string, map[string]string, *tbSession, bool) {
	_, id, env, ok := s.toolboxTarget(w, r)
	if !ok {
		return "", nil, nil, false
	}
	s.smu.Lock()
	ss := s.sessions[sessionKey(id, r.PathValue("sessionId"))]
	s.smu.Unlock()
	if ss == nil {
		writeErr(w, r, 404, "session not found")
		return "", nil, nil, false
	}
	return id, env, ss, true
}

func (ss *tbSession) command(w http.ResponseWriter, r *http.Request) (*tbCommand, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, c := range ss.commands {
		if c.id == r.PathValue("commandId") {
			return c, true
		}
	}
	writeErr(w, r, 404, "command not found")
	return nil, false
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	bx, id, _, ok := s.toolboxTarget(w, r)
	if !ok {
		return
	}
	var b struct {
		SessionID string `json:"sessionId"`
	}
	if !decode(w, r, &b) {
		return
	}
	switch b.SessionID {
	case "":
		writeErr(w, r, 400, "sessionId is required")
		return
	case "entrypoint": // apps/daemon/pkg/toolbox/process/session/session.go:36 (v0.190)
		writeErr(w, r, 400, "provided session ID is reserved and cannot be created/overridden")
		return
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	key := sessionKey(id, b.SessionID)
	if s.sessions[key] != nil { // apps/daemon/pkg/session/create.go:41
		writeErr(w, r, 409, "session already exists")
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	ss := &tbSession{id: b.SessionID, sandbox: id, ctx: ctx, cancel: cancel,
		queue: make(chan *tbCommand, 1024), runnerDone: make(chan struct{})}
	s.sessions[key] = ss
	go ss.runner(bx)
	w.WriteHeader(http.StatusCreated)
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	_, id, _, ok := s.toolboxTarget(w, r)
	if !ok {
		return
	}
	s.smu.Lock()
	list := s.sessionsOf(id)
	s.smu.Unlock()
	out := make([]any, 0, len(list))
	for _, ss := range list {
		out = append(out, ss.dto())
	}
	writeJSON(w, 200, out)
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	if _, _, ss, ok := s.sessionTarget(w, r); ok {
		writeJSON(w, 200, ss.dto())
	}
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	id, _, ss, ok := s.sessionTarget(w, r)
	if !ok {
		return
	}
	s.smu.Lock()
	delete(s.sessions, sessionKey(id, ss.id))
	s.smu.Unlock()
	ss.killTrees(true)
	ss.cancel()
	select {
	case <-ss.runnerDone:
	case <-time.After(sessionKillWait):
	}
	w.WriteHeader(http.StatusNoContent)
}

func (ss *tbSession) dto() map[string]any {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	cmds := make([]any, 0, len(ss.commands))
	for _, c := range ss.commands {
		cmds = append(cmds, c.dto())
	}
	return map[string]any{"sessionId": ss.id, "commands": cmds}
}

// dto is the daemon's Command. Called with the session's mu held.
func (c *tbCommand) dto() map[string]any {
	m := map[string]any{"id": c.id, "command": c.text}
	if c.exitCode != nil {
		m["exitCode"] = *c.exitCode
	}
	return m
}

func (s *Server) sessionCommand(w http.ResponseWriter, r *http.Request) {
	_, _, ss, ok := s.sessionTarget(w, r)
	if !ok {
		return
	}
	if c, ok := ss.command(w, r); ok {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		writeJSON(w, 200, c.dto())
	}
}

func (s *Server) sessionExec(w http.ResponseWriter, r *http.Request) {
	_, env, ss, ok := s.sessionTarget(w, r)
	if !ok {
		return
	}
	var b struct {
		Command           string `json:"command"`
		RunAsync          bool   `json:"runAsync"`
		Async             bool   `json:"async"`
		SuppressInputEcho bool   `json:"suppressInputEcho"`
	}
	if !decode(w, r, &b) {
		return
	}
	if strings.TrimSpace(b.Command) == "" {
		writeErr(w, r, 400, "command cannot be empty")
		return
	}
	c := &tbCommand{id: newUUID(), text: b.Command, async: b.RunAsync || b.Async,
		suppressEcho: b.SuppressInputEcho, env: env, done: make(chan struct{})}
	ss.mu.Lock()
	ss.commands = append(ss.commands, c)
	ss.mu.Unlock()
	select {
	case ss.queue <- c:
	default:
		writeErr(w, r, 400, "daytonatest: too many commands queued in the session")
		return
	}
	if c.async {
		writeJSON(w, http.StatusAccepted, map[string]any{"cmdId": c.id, "output": nil, "stdout": nil, "stderr": nil, "exitCode": nil})
		return
	}
	select {
	case <-c.done:
	case <-ss.ctx.Done():
	case <-r.Context().Done():
		return
	}
	ss.mu.Lock()
	code, log := c.exitCode, bytes.Clone(c.log)
	ss.mu.Unlock()
	if code == nil {
		writeErr(w, r, 400, "failed to execute command: session cancelled")
		return
	}
	resp := map[string]any{"cmdId": c.id, "exitCode": *code, "output": nil, "stdout": nil, "stderr": nil}
	switch logFormat(r.Header) {
	case logsCombined:
		resp["output"] = string(stripMarkers(log))
	case logsRaw:
		resp["output"] = string(log)
	case logsJSON:
		o, e := demux(log)
		resp["output"], resp["stdout"], resp["stderr"] = string(log), string(o), string(e)
	}
	writeJSON(w, 200, resp)
}

func (s *Server) sessionInput(w http.ResponseWriter, r *http.Request) {
	_, _, ss, ok := s.sessionTarget(w, r)
	if !ok {
		return
	}
	var b struct {
		Data string `json:"data"`
	}
	if !decode(w, r, &b) {
		return
	}
	if b.Data == "" {
		writeErr(w, r, 400, "Key: 'SessionSendInputRequest.Data' Error:Field validation for 'Data' failed on the 'required' tag")
		return
	}
	c, ok := ss.command(w, r)
	if !ok {
		return
	}
	data := b.Data
	if !strings.HasSuffix(data, "\n") {
		data += "\n"
	}
	ss.mu.Lock()
	started, in, code := c.started, c.input, c.exitCode
	ss.mu.Unlock()
	switch {
	case code != nil: // apps/daemon/pkg/session/input.go:37, and :43 below
		writeErr(w, r, http.StatusGone, fmt.Sprintf("command has already completed with exit code %d", *code))
		return
	case !started || in == nil:
		// The daemon opens the command's FIFO, made by the command's wrapper when it
		// starts and removed when it ends.
		writeErr(w, r, 500, "failed to open input pipe: open input.pipe: no such file or directory")
		return
	}
	// Outside the lock: a full pipe blocks the write, as the daemon's FIFO write does.
	if _, err := in.Write([]byte(data)); err != nil {
		writeErr(w, r, 500, "failed to write to input pipe: "+err.Error())
		return
	}
	if !c.suppressEcho {
		ss.mu.Lock()
		c.log = append(append(c.log, stdoutMarker...), data...)
		ss.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) sessionLogs(w http.ResponseWriter, r *http.Request) {
	_, _, ss, ok := s.sessionTarget(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Get("follow") == "true" {
		writeErr(w, r, 400, "daytonatest: follow (WebSocket) is not emulated")
		return
	}
	c, ok := ss.command(w, r)
	if !ok {
		return
	}
	ss.mu.Lock()
	log := bytes.Clone(c.log)
	ss.mu.Unlock()
	switch logFormat(r.Header) {
	case logsJSON:
		o, e := demux(log)
		writeJSON(w, 200, map[string]string{"output": string(log), "stdout": string(o), "stderr": string(e)})
		return
	case logsCombined:
		log = stripMarkers(log)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(200)
	_, _ = w.Write(log)
}

// runner runs the session's commands in order until the session ends.
func (ss *tbSession) runner(bx box) {
	defer close(ss.runnerDone)
	for {
		select {
		case <-ss.ctx.Done():
			ss.mu.Lock()
			for _, c := range ss.commands {
				if c.exitCode == nil {
					// Commands that never ran (or were killed) get no exit code; sync
					// exec waiters see the session end.
					select {
					case <-c.done:
					default:
						close(c.done)
					}
				}
			}
			ss.mu.Unlock()
			return
		case c := <-ss.queue:
			ss.run(bx, c)
		}
	}
}

func (ss *tbSession) run(bx box, c *tbCommand) {
	if ss.ctx.Err() != nil {
		return
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		ss.finish(c, 1, []byte("daytonatest: "+err.Error()))
		return
	}
	defer pr.Close()
	ss.mu.Lock()
	c.started = true
	if c.async {
		c.input = pw
	} else {
		pw.Close() // a sync command reads EOF at once
	}
	ss.mu.Unlock()
	out, errOut := &labeller{ss: ss, c: c, marker: stdoutMarker}, &labeller{ss: ss, c: c, marker: stderrMarker}
	// The first line names the command in its shell's argv, for killTrees.
	command := ": " + treeMarker(c) + "\n" + c.text
	code, err := bx.run(ss.ctx, ss.sandbox, proc{command: command, env: c.env, stdin: pr, stdout: out, stderr: errOut})
	out.flush()
	errOut.flush()
	ss.mu.Lock()
	c.input = nil
	ss.mu.Unlock()
	if c.async {
		pw.Close()
	}
	if ss.ctx.Err() != nil || ss.ending.Load() {
		return // deleted: the runner closes done
	}
	var msg []byte
	if err != nil {
		code, msg = 1, []byte("daytonatest: "+err.Error())
	}
	ss.finish(c, code, msg)
}

// treeMarker names a command's shell in its argv.
func treeMarker(c *tbCommand) string { return "daytonatest-command-" + c.id }

// killTrees kills the process trees of the session's running commands (killTree) and,
// with wait, waits for the killed processes to be gone (waitGone).
func (ss *tbSession) killTrees(wait bool) {
	ss.ending.Store(true)
	ss.mu.Lock()
	var running []string
	for _, c := range ss.commands {
		if c.started && c.exitCode == nil {
			running = append(running, treeMarker(c))
		}
	}
	ss.mu.Unlock()
	var pids []int
	for _, m := range running {
		pids = append(pids, killTree(m)...)
	}
	if wait {
		waitGone(pids, time.Now().Add(sessionKillWait))
	}
}

// finish records the exit code after the output (and an emulator error on stderr).
func (ss *tbSession) finish(c *tbCommand, code int, stderr []byte) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(stderr) > 0 {
		c.log = append(append(append(c.log, stderrMarker...), stderr...), '\n')
	}
	c.exitCode = &code
	close(c.done)
}

// labeller logs a stream a line at a time, as the daemon's read loops do.
type labeller struct {
	ss      *tbSession
	c       *tbCommand
	marker  []byte
	pending []byte
}

func (l *labeller) Write(p []byte) (int, error) {
	l.pending = append(l.pending, p...)
	for {
		i := bytes.IndexByte(l.pending, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.emit(l.pending[:i])
		l.pending = l.pending[i+1:]
	}
}

func (l *labeller) flush() {
	if len(l.pending) > 0 {
		l.emit(l.pending)
		l.pending = nil
	}
}

// emit logs one line: the marker, the line without NUL bytes (the shell's read drops
// them) and a newline.
func (l *labeller) emit(line []byte) {
	l.ss.mu.Lock()
	defer l.ss.mu.Unlock()
	l.c.log = append(l.c.log, l.marker...)
	l.c.log = append(l.c.log, bytes.ReplaceAll(line, []byte{0}, nil)...)
	l.c.log = append(l.c.log, '\n')
}

// How the daemon returns logs, by the request's X-Daytona-SDK-Version.
const (
	logsCombined = iota // plain text, markers stripped: no version (and no X-Daytona-Split-Output: true), or < 0.27.0
	logsRaw             // plain text with the markers: 0.27.0 <= version < 0.167.0, or unparsable
	logsJSON            // JSON {output, stdout, stderr}: version >= 0.167.0, or containing "dev"
)

var semverRE = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)(.*)$`)

// sdkVersionAtLeast compares an SDK version with major.minor.patch as the daemon does
// against "X.Y.Z-0": any pre-release of X.Y.Z counts as X.Y.Z. ok is false when v does
// not parse.
func sdkVersionAtLeast(v string, want [3]int) (atLeast, ok bool) {
	m := semverRE.FindStringSubmatch(v)
	if m == nil {
		return false, false
	}
	for i := range 3 {
		n, err := strconv.Atoi(m[i+1])
		if err != nil {
			return false, false
		}
		if n != want[i] {
			return n > want[i], true
		}
	}
	return true, true
}

func logFormat(h http.Header) int {
	v := h.Get("X-Daytona-SDK-Version")
	switch {
	case v == "":
		if h.Get("X-Daytona-Split-Output") == "true" {
			return logsRaw
		}
		return logsCombined
	case strings.Contains(v, "dev"):
		return logsJSON
	}
	if ge, ok := sdkVersionAtLeast(v, [3]int{0, 27, 0}); ok && !ge {
		return logsCombined
	}
	if ge, ok := sdkVersionAtLeast(v, [3]int{0, 167, 0}); ok && ge {
		return logsJSON
	}
	return logsRaw
}

func stripMarkers(b []byte) []byte {
	return bytes.ReplaceAll(bytes.ReplaceAll(b, stdoutMarker, nil), stderrMarker, nil)
}

// demux splits a log into its streams as the daemon's DemuxLogBytes does: each marker
// starts a segment of its stream that runs to the next marker; bytes before the first
// marker belong to neither.
func demux(b []byte) (stdout, stderr []byte) {
	stdout, stderr = []byte{}, []byte{}
	pos := 0
	for pos < len(b) {
		var dst *[]byte
		switch {
		case bytes.HasPrefix(b[pos:], stdoutMarker):
			dst = &stdout
		case bytes.HasPrefix(b[pos:], stderrMarker):
			dst = &stderr
		default:
			pos++
			continue
		}
		start := pos + len(stdoutMarker)
		end := len(b)
		for i := start; i+len(stdoutMarker) <= len(b); i++ {
			if bytes.HasPrefix(b[i:], stdoutMarker) || bytes.HasPrefix(b[i:], stderrMarker) {
				end = i
				break
			}
		}
		*dst = append(*dst, b[start:end]...)
		pos = end
	}
	return stdout, stderr
}
