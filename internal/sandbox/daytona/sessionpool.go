package daytona

import (
	"context"
	"sync"
)

// A sessionPool keeps, per sandbox, sessions idle between plain commands (plainexec.go),
// so that a command costs its exec and its reads, not a session's create and delete as
// well. Everything it does happens within Exec: no request is left to run after Exec
// has returned, where it would count as the sandbox's activity later than the command.
//
// Facts of the v0.190 daemon it relies on (apps/daemon/pkg/session):
//
//   - A session is one shell reading commands from its stdin (create.go, execute.go):
//     its commands run one after another, so a session lends itself to one command at a
//     time. A command gets its exit code once its wrapper has waited for its output to
//     be logged (execute.go's cmdWrapperFormat), which a background process holding the
//     command's stdout or stderr delays until it closes them: a session goes back to the
//     pool only once its command has an exit code. One whose command has none shortly
//     after its end markers (a server started with & that writes to the command's
//     output) is left to that process: neither reused, which would queue the next
//     command behind it, nor deleted, which would take its output's reader away.
//   - Each command's log stays in the session's directory, and its text in the session's
//     command list, until the session is deleted (delete.go removes the directory), so a
//     session is retired (deleted) after sessionMaxUses commands or sessionMaxLog bytes
//     of logs.
//   - An exec on a session that is gone (the sandbox restarted, the daemon with it)
//     answers 404 "session not found" before anything runs: the command is started again
//     on a new session.
//
// A command that is cancelled or times out is killed with its session (DELETE), which
// is therefore never reused; nothing else is killed, since each session runs one
// command at a time.
type sessionPool struct {
	mu   sync.Mutex
	byID map[string]*sandboxSessions // by the runtime's sandbox id
}

type sandboxSessions struct {
	sbID string // Daytona's id: a sandbox made again under the name has another
	idle []pooledSession
}

// pooledSession is a session of the pool and what it has run.
type pooledSession struct {
	id   string
	uses int
	log  int // bytes of output its commands logged
}

const (
	// sessionMaxIdle is how many idle sessions a sandbox keeps; more are deleted.
	sessionMaxIdle = 4
	// sessionMaxUses and sessionMaxLog retire a session: its logs and commands' text
	// stay in the sandbox until it is deleted.
	sessionMaxUses = 64
	sessionMaxLog  = 8 << 20
)

// entry returns the pool of the sandbox, emptied if it was another sandbox's under the
// same name. Called with mu held.
func (p *sessionPool) entry(id string, sb *Sandbox) *sandboxSessions {
	if p.byID == nil {
		p.byID = map[string]*sandboxSessions{}
	}
	e := p.byID[id]
	if e == nil || e.sbID != sb.ID {
		e = &sandboxSessions{sbID: sb.ID}
		p.byID[id] = e
	}
	return e
}

// drop forgets the sandbox's sessions (it is gone or being deleted; its sessions go
// with it).
func (p *sessionPool) drop(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.byID, id)
}

// reset forgets the sandbox's idle sessions (they went with a restart of the sandbox).
func (p *sessionPool) reset(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.byID[id]; e != nil {
		e.idle = nil
	}
}

// acquireSession lends an idle session of the sandbox, or creates one (fresh) when none
// is idle: the first command in a sandbox, and commands run at the same time, pay for
// a session's create.
func (r *Runtime) acquireSession(ctx context.Context, id string, sb *Sandbox) (s pooledSession, fresh bool, err error) {
	p := &r.pool
	p.mu.Lock()
	e := p.entry(id, sb)
	if n := len(e.idle); n > 0 {
		s, e.idle = e.idle[n-1], e.idle[:n-1]
	}
	p.mu.Unlock()
	if s.id != "" {
		return s, false, nil
	}
	s = pooledSession{id: "trueforge-" + randHex()}
	return s, true, r.C.CreateSession(ctx, sb, s.id)
}

// putSession puts the session of a finished command (its exit code recorded) back in the
// pool, or deletes it when the pool is full or the session has served its time.
func (r *Runtime) putSession(ctx context.Context, id string, sb *Sandbox, s pooledSession) {
	p := &r.pool
	p.mu.Lock()
	e := p.byID[id]
	keep := e != nil && e.sbID == sb.ID && len(e.idle) < sessionMaxIdle && s.uses < sessionMaxUses && s.log < sessionMaxLog
	if keep {
		e.idle = append(e.idle, s)
	}
	p.mu.Unlock()
	if !keep {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sessionTimeout)
		defer cancel()
		_ = r.C.DeleteSession(dctx, sb, s.id)
	}
}
