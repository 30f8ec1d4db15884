package daytona

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Session commands (toolbox /process/session): a session is a shell the daemon keeps
// running; each command is written to that shell's stdin wrapped in a script that feeds
// the command's stdin from a FIFO (POST .../input writes to it) and labels each line of
// its stdout and stderr into a log (GET .../logs). Facts that shape the client, from the
// v0.190 daemon source:
//
//   - An async command's stdin is kept open by a holder process until the command ends:
//     the command never sees EOF on stdin, whatever the client does.
//   - Input gets a newline appended when it does not end in one, and is echoed into the
//     log as stdout unless the command was started with SuppressInputEcho.
//   - Output reaches the log a line at a time (a shell read loop per stream); a last line
//     without a newline gets one, NUL bytes are dropped, and JSON log answers replace
//     invalid UTF-8.
//   - The exit code is recorded after the output has reached the log, so the logs read
//     after exitCode appears are complete.
//   - DELETE of the session sends SIGTERM to the session shell's process group and every
//     descendant, waits up to 5 s (DAYTONA_TERMINATION_GRACE_PERIOD) for them to go,
//     then sends SIGKILL, and answers when done.
//   - Commands of one session run one after another in the same shell; the command text
//     is kept and readable through GET .../command/{id} until the session is deleted, so
//     it must not carry secret values.

// SessionExecuteRequest is the toolbox's SessionExecuteRequest.
type SessionExecuteRequest struct {
	Command string `json:"command"`
	// RunAsync returns at once (202) with the command's id instead of waiting for it.
	RunAsync bool `json:"runAsync,omitempty"`
	// SuppressInputEcho keeps input sent to the command out of its log.
	SuppressInputEcho bool `json:"suppressInputEcho,omitempty"`
}

// SessionExecuteResponse is the toolbox's answer to a session exec: the command's id,
// and for a synchronous one its exit code and output (Stdout and Stderr apart for SDK
// versions >= 0.167.0).
type SessionExecuteResponse struct {
	CmdID    string  `json:"cmdId"`
	ExitCode *int    `json:"exitCode,omitempty"`
	Output   *string `json:"output,omitempty"`
	Stdout   *string `json:"stdout,omitempty"`
	Stderr   *string `json:"stderr,omitempty"`
}

// SessionCommand is a command of a session; ExitCode is nil while it runs.
type SessionCommand struct {
	ID       string `json:"id"`
	Command  string `json:"command"`
	ExitCode *int   `json:"exitCode,omitempty"`
}

// Session is a session and its commands.
type Session struct {
	SessionID string           `json:"sessionId"`
	Commands  []SessionCommand `json:"commands"`
}

// SessionLogs is a command's log so far, its streams apart. Output is the raw log with
// the daemon's 3-byte stream markers.
type SessionLogs struct {
	Output string `json:"output"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// sessionTimeout bounds one session call. A session DELETE may take the daemon's 5 s
// grace period before it answers.
const sessionTimeout = 30 * time.Second

func (c *Client) session(sb *Sandbox, method, path string, a ...any) (*request, error) {
	u, err := toolboxURL(sb, fmt.Sprintf(path, a...))
	if err != nil {
		return nil, err
	}
	return &request{method: method, url: u, timeout: sessionTimeout,
		idempotent: method == http.MethodGet || method == http.MethodDelete}, nil
}

// CreateSession starts a session (POST /process/session). The id is the caller's; an id
// that exists already (409) is taken as this call's own session, created by an attempt
// whose answer was lost, so the call is retried like an idempotent one. Use random ids.
func (c *Client) CreateSession(ctx context.Context, sb *Sandbox, id string) error {
	r, err := c.session(sb, http.MethodPost, "/process/session")
	if err != nil {
		return err
	}
	r.body, r.idempotent = map[string]string{"sessionId": id}, true
	_, err = c.do(ctx, r, nil)
	if IsConflict(err) {
		return nil
	}
	return err
}

// GetSession describes a session and its commands (GET /process/session/{id}).
func (c *Client) GetSession(ctx context.Context, sb *Sandbox, id string) (*Session, error) {
	r, err := c.session(sb, http.MethodGet, "/process/session/%s", esc(id))
	if err != nil {
		return nil, err
	}
	return call[Session](ctx, c, r)
}

// ListSessions lists the sandbox's sessions (GET /process/session).
func (c *Client) ListSessions(ctx context.Context, sb *Sandbox) ([]Session, error) {
	r, err := c.session(sb, http.MethodGet, "/process/session")
	if err != nil {
		return nil, err
	}
	var out []Session
	if _, err := c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteSession ends a session and kills its processes (DELETE /process/session/{id});
// it answers once they are gone (see the grace period above).
func (c *Client) DeleteSession(ctx context.Context, sb *Sandbox, id string) error {
	r, err := c.session(sb, http.MethodDelete, "/process/session/%s", esc(id))
	if err != nil {
		return err
	}
	_, err = c.do(ctx, r, nil)
	return err
}

// SessionExec runs a command in a session (POST /process/session/{id}/exec). It is not
// retried after a 5xx or a lost answer, since the command may have started. A
// synchronous call waits for the command, so give ctx the bound.
func (c *Client) SessionExec(ctx context.Context, sb *Sandbox, sessionID string, req SessionExecuteRequest) (*SessionExecuteResponse, error) {
	r, err := c.session(sb, http.MethodPost, "/process/session/%s/exec", esc(sessionID))
	if err != nil {
		return nil, err
	}
	r.body = req
	if !req.RunAsync {
		r.timeout = 24 * time.Hour // the daemon answers when the command ends
	}
	var out SessionExecuteResponse
	if _, err := c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	// cmdId is required in the daemon's SessionExecuteResponse (apps/daemon/pkg/toolbox/
	// process/session/types.go:24, v0.190; "required": ["cmdId"] in its swagger.json):
	// without it the command cannot be followed (its logs, exit code and input are all
	// under .../command/{cmdId}), so the answer is refused rather than polling .../command//logs.
	if out.CmdID == "" {
		return nil, fmt.Errorf("daytona: exec in session %s: malformed answer from the sandbox's daemon: the required field cmdId is missing or empty, so the command cannot be followed", sessionID)
	}
	return &out, nil
}

// SessionCommand reads a command's state (GET .../command/{cmdId}); ExitCode appears when
// it has finished.
func (c *Client) SessionCommand(ctx context.Context, sb *Sandbox, sessionID, cmdID string) (*SessionCommand, error) {
	r, err := c.session(sb, http.MethodGet, "/process/session/%s/command/%s", esc(sessionID), esc(cmdID))
	if err != nil {
		return nil, err
	}
	return call[SessionCommand](ctx, c, r)
}

// SessionCommandLogs reads a command's whole log so far (GET .../command/{cmdId}/logs).
// The client's X-Daytona-SDK-Version (SDKVersion, >= 0.167.0) makes the daemon answer
// JSON with the streams apart; an answer that is not JSON is an error.
func (c *Client) SessionCommandLogs(ctx context.Context, sb *Sandbox, sessionID, cmdID string) (*SessionLogs, error) {
	r, err := c.session(sb, http.MethodGet, "/process/session/%s/command/%s/logs", esc(sessionID), esc(cmdID))
	if err != nil {
		return nil, err
	}
	body, err := c.do(ctx, r, nil)
	if err != nil {
		return nil, err
	}
	var out SessionLogs
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("daytona: logs of command %s: not the JSON answer of a daemon >= 0.167: %w", cmdID, err)
	}
	return &out, nil
}

// SessionInput writes data to a running command's stdin (POST .../command/{cmdId}/input).
// The daemon appends a newline when data does not end in one, and refuses empty data.
// It is not retried after a 5xx or a lost answer, since the data may have been written;
// a 500 saying the input pipe could not be opened wrote nothing (the command has not
// started or has just ended), which IsInputNotOpen reports.
func (c *Client) SessionInput(ctx context.Context, sb *Sandbox, sessionID, cmdID, data string) error {
	r, err := c.session(sb, http.MethodPost, "/process/session/%s/command/%s/input", esc(sessionID), esc(cmdID))
	if err != nil {
		return err
	}
	r.body = map[string]string{"data": data}
	_, err = c.do(ctx, r, nil)
	return err
}

// IsInputNotOpen reports the daemon's answer to input for a command whose input pipe
// does not exist (yet or any more): nothing was written, so sending again is safe.
func IsInputNotOpen(err error) bool {
	e, ok := asAPI(err)
	return ok && e.Status == http.StatusInternalServerError && strings.Contains(strings.ToLower(e.Message), "failed to open input pipe")
}

// IsGone reports a 410: the command (or the session's shell) has ended.
func IsGone(err error) bool { return hasStatus(err, http.StatusGone) }
