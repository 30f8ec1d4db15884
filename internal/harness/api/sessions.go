package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sessions"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// agentJSON is an agent a user may run.
type agentJSON struct {
	Name           string   `json:"name"`
	Description    string   `json:"description"`
	CodeMode       bool     `json:"code_mode"`
	Skills         []string `json:"skills"`
	SandboxEnabled bool     `json:"sandbox_enabled"`
	// Environment is the agent's own environment (null without a sandbox).
	Environment   *string `json:"environment"`
	FileDownloads bool    `json:"file_downloads"`
	Replay        bool    `json:"replay"`
	// Ready: what the agent needs is published and its environment Ready; NotReady says
	// why not.
	Ready    bool   `json:"ready"`
	NotReady string `json:"not_ready,omitempty"`
}

// listAgents lists every published agent: any user may run any agent (the MCP servers
// and the operator's policy decide what it may do for that user).
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request, _ *caller) error {
	ctx := r.Context()
	names, err := s.cfg.Store.ListAgentNames(ctx)
	if err != nil {
		return err
	}
	ready := map[string]string{} // environment -> why it is not Ready ("" when it is)
	out := []agentJSON{}
	for _, name := range names {
		row, err := s.cfg.Store.GetAgent(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted since the list was read
		}
		if err != nil {
			return err
		}
		a := agentJSON{Name: name, Skills: []string{}}
		spec, err := agentspec.Decode(row.Spec)
		if err != nil {
			a.NotReady = "its stored spec is not valid; apply its configuration again"
			out = append(out, a)
			continue
		}
		as := agents.SpecOf(spec)
		a.Description, a.CodeMode, a.SandboxEnabled = as.Description, as.CodeMode, as.Sandbox.Enabled
		a.FileDownloads = as.Sandbox.Enabled && as.Sandbox.FileDownloads
		a.Replay = as.Model.Provider == agentspec.ModelScripted
		for _, sk := range as.Skills {
			a.Skills = append(a.Skills, sk.Name)
		}
		a.Ready = true
		if as.Sandbox.Enabled {
			env := row.Environment
			a.Environment = &env
			why, seen := ready[env]
			if !seen {
				why = s.envNotReady(ctx, env)
				ready[env] = why
			}
			if why == "" {
				why = s.envNotUsable(ctx, env, row.Owner, name)
			}
			a.Ready, a.NotReady = why == "", why
		}
		out = append(out, a)
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": out})
	return nil
}

// envNotReady says why environment name cannot make sandboxes now ("" when it can).
func (s *Server) envNotReady(ctx context.Context, name string) string {
	env, err := s.cfg.Store.GetEnvironment(ctx, name)
	if err != nil {
		return fmt.Sprintf("environment %q is not published", name)
	}
	snap, err := s.cfg.Store.GetSnapshot(ctx, env.SnapshotID)
	if err != nil {
		return fmt.Sprintf("environment %q has no snapshot; apply again to build it", name)
	}
	if snap.Status != sandbox.StatusReady {
		return fmt.Sprintf("environment %q is %s, not Ready", name, snap.Status)
	}
	return ""
}

// envNotUsable says why agent, owned by owner, may not run on environment name ("" when
// it may): its secrets are its owner's unless shared (store.Environment.UsableBy), and
// so are the volumes it mounts (store.UnusableVolume).
func (s *Server) envNotUsable(ctx context.Context, name, owner, agent string) string {
	env, err := s.cfg.Store.GetEnvironment(ctx, name)
	if err != nil {
		return ""
	}
	if !env.UsableBy(owner) {
		return fmt.Sprintf("environment %q has secrets that its owner %q does not share with %q, the owner of agent %q", name, env.Owner, owner, agent)
	}
	if vol, unusable, err := s.cfg.Store.UnusableVolume(ctx, env, owner); err == nil && unusable {
		return fmt.Sprintf("environment %q mounts volume %q, which its owner %q does not share with %q, the owner of agent %q", name, vol.Name, vol.Owner, owner, agent)
	}
	return ""
}

// environmentJSON is a Ready environment a session may be created on.
type environmentJSON struct {
	Name            string `json:"name"`
	SandboxProvider string `json:"sandbox_provider"`
	Image           string `json:"image"`
	CPU             int64  `json:"cpu"`
	Memory          int64  `json:"memory"` // GB
	Disk            int64  `json:"disk"`   // GB
	Reserved        bool   `json:"reserved"`
}

// listEnvironments lists the Ready environments (only those may be chosen) that agent
// ?agent= may run on: without secrets, its owner's, or shared with its owner. Without
// ?agent=, those every agent may run on (no secrets, or shared with "*"): an
// environment's secrets are not offered to a session of an agent whose owner was not
// given them.
func (s *Server) listEnvironments(w http.ResponseWriter, r *http.Request, _ *caller) error {
	ctx := r.Context()
	who := "" // no owner: only what everyone may use
	if name := r.URL.Query().Get("agent"); name != "" {
		row, err := s.cfg.Store.GetAgent(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return errorf(http.StatusUnprocessableEntity, CodeUnknownAgent, "agent %q (query parameter \"agent\") is not published; GET /api/v1/agents lists the agents", name)
		}
		if err != nil {
			return err
		}
		who = row.Owner
	}
	envs, err := s.cfg.Store.ListEnvironments(ctx)
	if err != nil {
		return err
	}
	out := []environmentJSON{}
	for _, e := range envs {
		if !e.UsableBy(who) {
			continue
		}
		if _, unusable, err := s.cfg.Store.UnusableVolume(ctx, e, who); err != nil || unusable {
			continue
		}
		snap, err := s.cfg.Store.GetSnapshot(ctx, e.SnapshotID)
		if err != nil || snap.Status != sandbox.StatusReady {
			continue
		}
		out = append(out, environmentJSON{Name: e.Name, SandboxProvider: e.Provider, Image: e.Image, CPU: e.CPU,
			Memory: e.MemoryGB, Disk: e.DiskGB, Reserved: e.Reserved})
	}
	writeJSON(w, http.StatusOK, map[string]any{"environments": out})
	return nil
}

// sessionJSON is a session as the API shows it.
type sessionJSON struct {
	ID    string `json:"id"`
	Agent string `json:"agent"`
	Owner string `json:"owner"`
	// Environment is the one-off environment chosen at creation; null means the agent's.
	Environment  *string   `json:"environment"`
	Replay       bool      `json:"replay"`
	InputTokens  int64     `json:"input_tokens"`
	OutputTokens int64     `json:"output_tokens"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	// The rest is set for one session (GET /sessions/{id}), not in lists.
	Running *bool        `json:"running,omitempty"`
	RunID   string       `json:"run_id,omitempty"`
	LastSeq *int64       `json:"last_seq,omitempty"`
	Sandbox *sandboxJSON `json:"sandbox,omitempty"`
}

type sandboxJSON struct {
	ID          string    `json:"id"`
	State       string    `json:"state"`
	Environment string    `json:"environment"`
	SnapshotID  string    `json:"snapshot_id"`
	Generation  int64     `json:"generation"`
	LastUsedAt  time.Time `json:"last_used_at"`
}

func sessionOf(ss store.Session) sessionJSON {
	j := sessionJSON{ID: ss.ID, Agent: ss.Agent, Owner: ss.Owner, Replay: ss.Replay, InputTokens: ss.InputTokens,
		OutputTokens: ss.OutputTokens, CreatedAt: ss.CreatedAt.UTC(), UpdatedAt: ss.UpdatedAt.UTC()}
	if ss.Environment != "" {
		env := ss.Environment
		j.Environment = &env
	}
	return j
}

// ownSession is the caller's session id: another user's, or none, is 404 alike.
func (s *Server) ownSession(r *http.Request, c *caller) (store.Session, error) {
	if c.sessRead {
		// Read with the token's user for this request (authSession): sessions.Get's
		// rule, without a second statement.
		if !c.sessFound || sessions.Check(c.sess, c.session(), false) != nil {
			return store.Session{}, notFound("session " + quote(r.PathValue("id")))
		}
		return c.sess, nil
	}
	return s.sessionFor(r, c, false)
}

// own is the route handler of h, a handler of one of the caller's sessions: h runs with
// session {id} as ownSession reads it, so another user's session, or none, is 404
// before h runs.
func (s *Server) own(h func(w http.ResponseWriter, r *http.Request, ss store.Session) error) func(http.ResponseWriter, *http.Request, *caller) error {
	return func(w http.ResponseWriter, r *http.Request, c *caller) error {
		ss, err := s.ownSession(r, c)
		if err != nil {
			return err
		}
		return h(w, r, ss)
	}
}

// sessionFor reads session {id} for the caller; with adminToo an admin gets any user's.
func (s *Server) sessionFor(r *http.Request, c *caller, adminToo bool) (store.Session, error) {
	id := r.PathValue("id")
	ss, err := sessions.Get(r.Context(), s.cfg.Store, id, c.session(), adminToo)
	// Another user's is the same answer as a missing session: no existence oracle.
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, sessions.ErrNotOwner) {
		return store.Session{}, notFound("session " + quote(id))
	}
	return ss, err
}

// session is the caller as the sessions service knows it.
func (c *caller) session() sessions.Caller {
	return sessions.Caller{Name: c.user.Name, Admin: c.user.Admin}
}

// createRequest is POST /api/v1/sessions's body.
type createRequest struct {
	Agent       string `json:"agent"`
	Environment string `json:"environment,omitempty"`
}

func (b createRequest) check() error { return required("agent", b.Agent) }

// createSession starts a session of an agent for the caller, optionally on a one-off
// Ready environment (only for an agent with a sandbox).
func (s *Server) createSession(w http.ResponseWriter, r *http.Request, c *caller) error {
	var req createRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	ctx := r.Context()
	a, err := agents.Load(ctx, s.cfg.Store, req.Agent)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errorf(http.StatusUnprocessableEntity, CodeUnknownAgent, "agent %q is not published; GET /api/v1/agents lists the agents", req.Agent)
	case errors.Is(err, agents.ErrNotReady):
		return errorf(http.StatusUnprocessableEntity, CodeAgentNotReady, "%s", err.Error())
	case err != nil:
		return err
	}
	if req.Environment != "" {
		if !a.Spec.Sandbox.Enabled {
			return errorf(http.StatusUnprocessableEntity, CodeBadEnvironment, "agent %q has no sandbox (sandbox.enabled is false), so it runs on no environment; create the session without \"environment\"", a.Name)
		}
		if why := s.envNotReady(ctx, req.Environment); why != "" {
			return errorf(http.StatusUnprocessableEntity, CodeBadEnvironment, "%s; only a Ready environment may be chosen (GET /api/v1/environments lists them)", why)
		}
		if why := s.envNotUsable(ctx, req.Environment, a.Owner, a.Name); why != "" {
			return errorf(http.StatusUnprocessableEntity, CodeBadEnvironment, "field \"environment\": %s, so it cannot be chosen for this agent's session (GET /api/v1/environments?agent=%s lists those it may use)",
				why, a.Name)
		}
	}
	ss := store.Session{ID: "s-" + randomHex(8), Agent: a.Name, Owner: c.user.Name, Replay: a.IsReplay(), Environment: req.Environment}
	if err := s.cfg.Store.CreateSession(ctx, ss); err != nil {
		return err
	}
	if ss, err = s.cfg.Store.GetSession(ctx, ss.ID); err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/sessions/"+ss.ID)
	writeJSON(w, http.StatusCreated, sessionOf(ss))
	return nil
}

// listSessions lists the caller's sessions, newest first; ?all=1 lists everyone's (admins
// only); ?agent= keeps one agent's.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, c *caller) error {
	all := r.URL.Query().Get("all")
	ss, err := sessions.List(r.Context(), s.cfg.Store, c.session(), all != "" && all != "0" && all != "false", r.URL.Query().Get("agent"))
	if errors.Is(err, sessions.ErrAdminOnly) {
		return errorf(http.StatusForbidden, CodeAdminOnly, "only an admin may list every user's sessions (?all=1)")
	}
	if err != nil {
		return err
	}
	out := make([]sessionJSON, 0, len(ss))
	for _, x := range ss {
		out = append(out, sessionOf(x))
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
	return nil
}

// getSession is one of the caller's sessions with its running run, last event and
// sandbox.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request, ss store.Session) error {
	d, err := sessions.Show(r.Context(), s.cfg.Store, ss.ID)
	if err != nil {
		return err
	}
	j := sessionOf(ss)
	running := d.Running != nil
	if running {
		j.RunID = d.Running.ID
	}
	j.Running, j.LastSeq = &running, &d.LastSeq
	if rec := d.Sandbox; rec != nil {
		j.Sandbox = &sandboxJSON{ID: rec.SandboxID, State: rec.State, Environment: rec.Environment, SnapshotID: rec.SnapshotID,
			Generation: rec.Generation, LastUsedAt: rec.LastUsedAt.UTC()}
	}
	writeJSON(w, http.StatusOK, j)
	return nil
}

// deleteSession deletes a session with its sandbox, artifacts and log, as `sessions
// delete` does: not while a run is live. An admin may delete anyone's (audited).
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, c *caller) error {
	ss, err := s.sessionFor(r, c, true)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if lr := s.liveRun(ss.ID); lr != nil {
		return errorf(http.StatusConflict, CodeBusy, "session %s is running turn %s; cancel it (POST /api/v1/sessions/%s/cancel), then delete the session", ss.ID, lr.id, ss.ID)
	}
	// Runs of dead harnesses are ended first; a live one elsewhere keeps the session.
	if err := sessions.Delete(ctx, s.cfg.Store, s.cfg.Sandboxes, ss.ID); errors.Is(err, runner.ErrBusy) {
		return errorf(http.StatusConflict, CodeBusy, "%v", err)
	} else if err != nil {
		return err
	}
	if ss.Owner != c.user.Name {
		if _, err := s.cfg.Store.AppendAudit(context.WithoutCancel(ctx), store.AuditEntry{Actor: c.user.Name, Action: store.AuditSessionDelete,
			Target: ss.ID, Detail: fmt.Sprintf("session of user %q, agent %q, created %s", ss.Owner, ss.Agent, ss.CreatedAt.UTC().Format(time.RFC3339))}); err != nil {
			s.log.Error("the audit log did not take an admin's delete", "session", ss.ID, "admin", c.user.Name, "err", err)
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// messageRequest is POST /sessions/{id}/messages's body.
type messageRequest struct {
	Text string `json:"text"`
	// Attachments are ids of the session's attachments (POST .../attachments) that the
	// message carries.
	Attachments []string `json:"attachments,omitempty"`
}

func (b messageRequest) check() error { return required("text", b.Text) }

// postMessage sends a message: the turn runs in this process, not tied to the request,
// and the answer (202, the run's id) comes once the run has started (its row and the
// user message committed). A second message while a run is live is 409.
func (s *Server) postMessage(w http.ResponseWriter, r *http.Request, ss store.Session) error {
	var req messageRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	attached, err := s.messageAttachments(r, ss, req.Attachments)
	if err != nil {
		return err
	}
	runID := runner.NewRunID()
	runCtx, cancel := context.WithCancel(s.runCtx)
	lr := &liveRun{id: runID, cancel: cancel, done: make(chan struct{})}
	s.liveRun(ss.ID) // a run that just finished is let go first
	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		cancel()
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "the harness is shutting down; send the message again in a moment (another replica may take it)")
	case s.runs[ss.ID] != nil:
		busy := s.runs[ss.ID].id
		s.mu.Unlock()
		cancel()
		return errorf(http.StatusConflict, CodeBusy, "session %s is running turn %s; wait for it to finish (its run_finished event) or cancel it, then send the message again", ss.ID, busy)
	}
	s.runs[ss.ID] = lr
	s.wg.Add(1)
	s.mu.Unlock()
	release := func() {
		s.mu.Lock()
		if s.runs[ss.ID] == lr {
			delete(s.runs, ss.ID)
		}
		s.mu.Unlock()
		cancel()
		close(lr.done)
		s.wg.Done()
	}

	rn, err := s.cfg.Runner(r.Context(), ss.Agent, ss.Owner)
	if err != nil {
		release()
		switch {
		case errors.Is(err, store.ErrNotFound):
			return errorf(http.StatusUnprocessableEntity, CodeUnknownAgent, "the session's agent %q is no longer published", ss.Agent)
		case errors.Is(err, agents.ErrNotReady):
			return errorf(http.StatusUnprocessableEntity, CodeAgentNotReady, "%s", err.Error())
		}
		return errorf(http.StatusUnprocessableEntity, CodeAgentNotReady, "the agent cannot run: %v", err)
	}
	if rn.Owner == "" {
		// The process's name in run rows, read once rather than from /proc per message.
		rn.Owner = s.owner
	}
	h := s.hubFor(ss.ID)
	h.begin(runID)
	started := make(chan struct{})
	var once sync.Once
	obs := s.metrics.run() // metrics_run.go
	emit := func(e runner.Event) {
		if !e.Partial {
			once.Do(func() { lr.started.Store(true); close(started) })
			obs.observe(e.Kind, e.Payload, e.Value)
			if e.Kind == events.KindRunFinished {
				lr.finished.Store(true)
			}
		}
		h.emit(runID, e)
	}
	result := make(chan error, 1)
	go func() {
		defer release()
		defer s.dropHub(ss.ID, h)
		out, err := rn.RunMessageIn(runCtx, runID, ss, events.UserMessage{Text: req.Text, Attachments: attached}, emit)
		h.end()
		select {
		case <-started:
			s.metrics.runFinished(out.Status)
			if err != nil {
				s.log.Warn("run ended with an error", "session", ss.ID, "run", runID, "err", err)
			}
		default:
		}
		result <- err
	}()
	select {
	case <-started:
	case err := <-result:
		select {
		case <-started: // it started and ended at once
		default:
			switch {
			case errors.Is(err, runner.ErrBusy), errors.Is(err, store.ErrRunning):
				return errorf(http.StatusConflict, CodeBusy, "%s", err.Error())
			case errors.Is(err, store.ErrNotFound):
				return notFound("session " + quote(ss.ID))
			case err == nil:
				err = errors.New("the run ended before it started")
			}
			return err
		}
	}
	s.metrics.runStarted()
	writeJSON(w, http.StatusAccepted, map[string]string{"run_id": runID})
	return nil
}

// cancelRun cancels the session's running turn: at once when this process runs it,
// else by asking through the run's row, which the replica running it reads at its next
// heartbeat (within runner.DefaultHeartbeatEvery).
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request, ss store.Session) error {
	if lr := s.liveRun(ss.ID); lr != nil {
		lr.cancel()
		writeJSON(w, http.StatusAccepted, map[string]any{"run_id": lr.id, "where": "this replica"})
		return nil
	}
	run, err := sessions.Cancel(r.Context(), s.cfg.Store, ss.ID)
	switch {
	case errors.Is(err, sessions.ErrNotRunning) && run.ID != "":
		return errorf(http.StatusConflict, CodeNotRunning, "session %s has no running turn to cancel (run %s just ended)", ss.ID, run.ID)
	case errors.Is(err, sessions.ErrNotRunning):
		return errorf(http.StatusConflict, CodeNotRunning, "session %s has no running turn to cancel", ss.ID)
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"run_id": run.ID, "where": "another process (" + run.Owner + "); it cancels at its next heartbeat"})
	return nil
}

func quote(s string) string { return fmt.Sprintf("%q", s) }
