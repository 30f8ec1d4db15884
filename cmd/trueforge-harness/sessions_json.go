package main

import (
	"encoding/json"
	"io"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sessions"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// The -o json shapes of the session commands. They are the documented schema (the
// running-agents guide lists every field): add fields, never rename or drop one.

// sessionJSON is one session in `sessions list -o json` (and the head of `sessions show`).
type sessionJSON struct {
	ID           string       `json:"id"`
	Agent        string       `json:"agent"`
	Owner        string       `json:"owner"`
	Replay       bool         `json:"replay"`
	InputTokens  int64        `json:"input_tokens"`
	OutputTokens int64        `json:"output_tokens"`
	CreatedAt    time.Time    `json:"created_at"`
	UpdatedAt    time.Time    `json:"updated_at"`
	Sandbox      *sandboxJSON `json:"sandbox"` // null: none was ever provisioned
}

// sandboxJSON is a session's sandbox record, as `sandboxes list -o json` lists them too.
type sandboxJSON struct {
	ID          string    `json:"id"`
	Session     string    `json:"session"`
	State       string    `json:"state"`
	Snapshot    string    `json:"snapshot"`
	Environment string    `json:"environment"`
	Provider    string    `json:"provider"`
	Generation  int64     `json:"generation"`
	LastUsedAt  time.Time `json:"last_used_at"`
	ActiveExecs int64     `json:"active_execs"`
	Uncertain   []string  `json:"uncertain"`
	Orphan      bool      `json:"orphan"`
}

type runJSON struct {
	ID        string     `json:"id"`
	Status    string     `json:"status"`
	Detail    string     `json:"detail"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"` // null while it runs
}

type eventJSON struct {
	Seq     int64           `json:"seq"`
	RunID   string          `json:"run_id"`
	Kind    string          `json:"kind"`
	At      time.Time       `json:"at"`
	Payload json.RawMessage `json:"payload"`
}

// sessionShowJSON is `sessions show ID -o json`.
type sessionShowJSON struct {
	sessionJSON
	Runs   []runJSON   `json:"runs"`
	Events []eventJSON `json:"events"`
}

func sessionRow(s store.Session) sessionJSON {
	return sessionJSON{ID: s.ID, Agent: s.Agent, Owner: s.Owner, Replay: s.Replay, InputTokens: s.InputTokens,
		OutputTokens: s.OutputTokens, CreatedAt: s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC()}
}

func sandboxRow(r store.SessionSandbox) *sandboxJSON {
	unc := r.Uncertain
	if unc == nil {
		unc = []string{}
	}
	return &sandboxJSON{ID: r.SandboxID, Session: r.SessionID, State: r.State, Snapshot: r.SnapshotID, Environment: r.Environment,
		Provider: r.Provider, Generation: r.Generation, LastUsedAt: r.LastUsedAt.UTC(), ActiveExecs: r.ActiveExecs, Uncertain: unc}
}

func showJSON(w io.Writer, s store.Session, d sessions.Detail, evs []store.Event) error {
	doc := sessionShowJSON{sessionJSON: sessionRow(s), Runs: []runJSON{}, Events: make([]eventJSON, 0, len(evs))}
	if d.Sandbox != nil {
		doc.Sandbox = sandboxRow(*d.Sandbox)
	}
	for _, r := range d.Runs {
		j := runJSON{ID: r.ID, Status: r.Status, Detail: r.Detail, StartedAt: r.StartedAt.UTC()}
		if !r.EndedAt.IsZero() {
			t := r.EndedAt.UTC()
			j.EndedAt = &t
		}
		doc.Runs = append(doc.Runs, j)
	}
	for _, e := range evs {
		doc.Events = append(doc.Events, eventJSON{Seq: e.Seq, RunID: e.RunID, Kind: e.Kind, At: e.CreatedAt.UTC(), Payload: json.RawMessage(e.Payload)})
	}
	return writeJSON(w, doc)
}
