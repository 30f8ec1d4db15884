// Package sessions is what the CLI (trueforge-harness sessions, files) and the HTTP API
// do to a session in the same way: who may see it, list it, show it, delete it, cancel
// its turn and read its files. Each decision and store call is written once here, so
// the two never drift apart; the callers keep only their own printing, JSON and status
// codes, which they choose by the sentinel errors below.
package sessions

import (
	"context"
	"errors"
	"fmt"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

var (
	// ErrNotOwner is a session of another user than the caller's.
	ErrNotOwner = errors.New("the session belongs to another user")
	// ErrAdminOnly is a list of every user's sessions asked by a caller who is no admin.
	ErrAdminOnly = errors.New("only an admin may list every user's sessions")
	// ErrNotRunning is a cancel of a session with no running turn.
	ErrNotRunning = errors.New("the session has no running turn")
)

// Caller is who asks: a user, and whether that user is an admin.
type Caller struct {
	Name  string
	Admin bool
}

// Get reads session id for c. Another user's session is ErrNotOwner (wrapped), unless
// adminToo and c is an admin; the session is returned with that error so that the
// caller may say whose it is (the API does not: there it is a 404 like a missing one).
func Get(ctx context.Context, st *store.Store, id string, c Caller, adminToo bool) (store.Session, error) {
	s, err := st.GetSession(ctx, id)
	if err != nil {
		return store.Session{}, err
	}
	return s, Check(s, c, adminToo)
}

// Check is Get's rule for a session already read: c's own, or any with adminToo when c
// is an admin; else ErrNotOwner (wrapped).
func Check(s store.Session, c Caller, adminToo bool) error {
	if s.Owner != c.Name && !(adminToo && c.Admin) {
		return fmt.Errorf("session %s belongs to %q, not to %q: %w", s.ID, s.Owner, c.Name, ErrNotOwner)
	}
	return nil
}

// List is c's sessions, newest first, of one agent unless agent is ""; with all,
// every user's, which only an admin may list (else ErrAdminOnly).
func List(ctx context.Context, st *store.Store, c Caller, all bool, agent string) ([]store.Session, error) {
	owner := c.Name
	if all {
		if !c.Admin {
			return nil, ErrAdminOnly
		}
		owner = ""
	}
	return st.ListSessions(ctx, owner, agent)
}

// Detail is what showing one session tells beyond its row.
type Detail struct {
	// Sandbox is the session's sandbox record; nil when none was ever provisioned.
	Sandbox *store.SessionSandbox
	// Running is the session's running turn; nil when none runs.
	Running *store.Run
	// Runs are all its turns, oldest first.
	Runs []store.Run
	// LastSeq is the seq of its last event (0 for none).
	LastSeq int64
}

// Show reads the detail of session id.
func Show(ctx context.Context, st *store.Store, id string) (Detail, error) {
	var d Detail
	if rec, err := st.GetSessionSandbox(ctx, id); err == nil {
		d.Sandbox = &rec
	} else if !errors.Is(err, store.ErrNotFound) {
		return d, err
	}
	if run, err := st.RunningRun(ctx, id); err == nil {
		d.Running = &run
	} else if !errors.Is(err, store.ErrNotFound) {
		return d, err
	}
	runs, err := st.Runs(ctx, id)
	if err != nil {
		return d, err
	}
	d.Runs = runs
	err = st.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM session_events WHERE session_id = ?`, id).Scan(&d.LastSeq)
	return d, err
}

// Cancel asks the running turn of session id to end, through its run's row: the
// process running it reads that at its next heartbeat (within
// runner.DefaultHeartbeatEvery). No running turn is ErrNotRunning (wrapped), also when
// the turn ended just before the ask; the run is returned with it in that case.
func Cancel(ctx context.Context, st *store.Store, id string) (store.Run, error) {
	run, err := st.RunningRun(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Run{}, fmt.Errorf("session %s: %w", id, ErrNotRunning)
	}
	if err != nil {
		return store.Run{}, err
	}
	ok, err := st.RequestCancel(ctx, run.ID)
	if err != nil {
		return store.Run{}, err
	}
	if !ok {
		return run, fmt.Errorf("session %s: run %s just ended: %w", id, run.ID, ErrNotRunning)
	}
	return run, nil
}

// Delete deletes session id: its sandbox (when sandboxes is not nil), then its rows,
// events and artifacts. Not under a live run: its harness would go on writing to a
// session whose rows and sandbox are gone, so runs of dead harnesses are ended first and
// a live one elsewhere refuses the delete with runner.ErrBusy (wrapped). A session
// already gone is not an error.
func Delete(ctx context.Context, st *store.Store, sandboxes *lifecycle.Manager, id string) error {
	if _, err := runner.Repair(ctx, st, id, lifecycle.ProcessOwner(), 0); err != nil {
		if errors.Is(err, runner.ErrBusy) {
			return fmt.Errorf("session %s is in use, so it was not deleted: %w", id, err)
		}
		return err
	}
	if sandboxes != nil {
		if err := sandboxes.Delete(ctx, id); err != nil {
			return fmt.Errorf("deleting the sandbox of session %s: %w", id, err)
		}
	}
	if err := st.DeleteSession(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}
