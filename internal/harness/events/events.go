// Package events is the session event log's vocabulary: a constant per kind and a
// payload type per kind, whose json tags are the field names stored in the log. The
// runner, the sandbox lifecycle manager and the egress proxies write through Encode (or
// Append); the CLI and the runner read through Decode.
//
// Logs are append-only and outlive harness versions, so Decode also reads every payload
// shape earlier harnesses stored: sandbox_lost with status/cause (a call that saw its
// sandbox die) beside state/reason (everything else), artifacts stored under their Go
// field names (Path, SHA256, ExpiresAt, ...), and sandbox_network_reattached, which
// harnesses no longer record. A kind this package does not know decodes to Unknown, so
// a log written by a newer harness still prints.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Kinds of the session log.
const (
	KindUserMessage    = "user_message"
	KindModelMessage   = "model_message"
	KindUsage          = "usage"
	KindToolCall       = "tool_call"
	KindToolResult     = "tool_result"
	KindCancelled      = "cancelled"
	KindError          = "error"
	KindLimit          = "limit"
	KindRunInterrupted = "run_interrupted"
	KindRunFinished    = "run_finished"

	KindSandboxProvisioned = "sandbox_provisioned"
	KindSandboxResumed     = "sandbox_resumed"
	KindSandboxStopped     = "sandbox_stopped"
	KindSandboxArchived    = "sandbox_archived"
	KindSandboxDeleted     = "sandbox_deleted"
	KindSandboxLost        = "sandbox_lost"
	KindSandboxRecovered   = "sandbox_recovered"
	KindSandboxReclaimed   = "sandbox_reclaimed"
	// KindSandboxNetworkReattached is no longer recorded: harnesses before the
	// per-sandbox socket directories restarted a running sandbox to reach a recreated
	// egress proxy and said so with it. Logs of that time still hold it.
	KindSandboxNetworkReattached = "sandbox_network_reattached"

	// KindEgress is one network decision of a local sandbox's egress proxy.
	KindEgress = "egress"
)

// Payload is the payload of one kind of event.
type Payload interface {
	Kind() string
}

// UserMessage is what the user said; it is committed before the model is called.
type UserMessage struct {
	Text string `json:"text"`
	// Attachments are the files the message carries (package attachments).
	Attachments []Attachment `json:"attachments,omitempty"`
	// TraceID is the OpenTelemetry trace of the turn this message opened, set by the
	// runner when tracing is on: what the web page links to.
	TraceID string `json:"trace_id,omitempty"`
}

// Attachment is a file a user message carries, as the model and the event log see it:
// never its content, which reaches the workspace when a tool call needs the sandbox.
type Attachment struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	Path           string `json:"path"`
	Size           int64  `json:"size"`
	SHA256         string `json:"sha256"`
	DeclaredType   string `json:"declared_type,omitempty"`
	DetectedType   string `json:"detected_type"`
	Classification string `json:"classification"`
	Uploader       string `json:"uploader"`
}

// ModelText is the message as the model reads it: the text, then one line per
// attachment with where it will be, its size, type, digest and classification.
func (m UserMessage) ModelText() string {
	if len(m.Attachments) == 0 {
		return m.Text
	}
	var b strings.Builder
	b.WriteString(m.Text)
	b.WriteString("\n\n[attachments: files the user attached; each is written to its path when a tool first uses the sandbox]")
	for _, a := range m.Attachments {
		fmt.Fprintf(&b, "\n- %s: %d bytes, type %s", a.Path, a.Size, a.DetectedType)
		if a.DeclaredType != "" {
			fmt.Fprintf(&b, " (declared %s)", a.DeclaredType)
		}
		fmt.Fprintf(&b, ", sha256 %s, classified %s", a.SHA256, a.Classification)
	}
	return b.String()
}

// ModelMessage is one model step's answer.
type ModelMessage struct {
	Text       string           `json:"text"`
	ToolCalls  []model.ToolCall `json:"tool_calls"`
	Model      string           `json:"model"`
	StopReason string           `json:"stop_reason"`
	// Replay: a scripted model produced it, not a live one.
	Replay bool `json:"replay"`
}

// Usage is what a model step cost and where the turn stands against its budget.
type Usage struct {
	Step            model.Usage `json:"step"`
	RunInputTokens  int64       `json:"run_input_tokens"`
	RunOutputTokens int64       `json:"run_output_tokens"`
	Budget          int64       `json:"budget"`
}

// ToolCall is a call about to run; its seq is the source event of what it offers.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolResult is what a call returned to the model (already cut to the model's limit).
type ToolResult struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Text      string `json:"text"`
	IsError   bool   `json:"is_error"`
	Truncated bool   `json:"truncated"`
	// FullSize is the size of the result before it was cut.
	FullSize int `json:"full_size"`
	// Provisioned: the call created the session's sandbox.
	Provisioned bool `json:"provisioned,omitempty"`
	// Artifact is what offer_artifact offered.
	Artifact *Artifact `json:"artifact,omitempty"`
	// Synthetic: no call returned it; a repair gave a call whose harness died this
	// result.
	Synthetic bool `json:"synthetic,omitempty"`
}

// Artifact is a file offered for download, as the tool_result of offer_artifact
// records it (the content stays in the store).
type Artifact struct {
	ID             string    `json:"id"`
	Path           string    `json:"path"`
	SHA256         string    `json:"sha256"`
	Size           int64     `json:"size"`
	SourceEvent    int64     `json:"source_event"`
	Classification string    `json:"classification"`
	ExpiresAt      time.Time `json:"expires_at"`
	SnapshotID     string    `json:"snapshot_id"`
	SandboxID      string    `json:"sandbox_id"`
	Commands       []string  `json:"commands"`
	CreatedAt      time.Time `json:"created_at"`
}

// ArtifactOf is the record of a stored artifact; nil for nil.
func ArtifactOf(a *store.Artifact) *Artifact {
	if a == nil {
		return nil
	}
	return &Artifact{ID: a.ID, Path: a.Path, SHA256: a.SHA256, Size: a.Size, SourceEvent: a.SourceEvent,
		Classification: a.Classification, ExpiresAt: a.ExpiresAt, SnapshotID: a.SnapshotID, SandboxID: a.SandboxID,
		Commands: a.Commands, CreatedAt: a.CreatedAt}
}

// UnmarshalJSON reads both the current shape and the legacy one (store.Artifact).
func (a *Artifact) UnmarshalJSON(b []byte) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	if _, legacy := keys["ExpiresAt"]; legacy {
		// Harnesses before this package stored the store's type as is, under its Go
		// field names (with the session id and a null content, which are dropped).
		var l store.Artifact
		if err := json.Unmarshal(b, &l); err != nil {
			return err
		}
		*a = *ArtifactOf(&l)
		return nil
	}
	type current Artifact // without this method
	return json.Unmarshal(b, (*current)(a))
}

// Cancelled: the caller cancelled the turn.
type Cancelled struct {
	RunID  string `json:"run_id"`
	Reason string `json:"reason"`
}

// Error is a failure that ended the turn (a model call that failed).
type Error struct {
	Message string `json:"message"`
	Where   string `json:"where"`
}

// Limit: the turn stopped at max_turns or token_budget.
type Limit struct {
	Limit string `json:"limit"`
	Value int64  `json:"value"`
	// Used is the tokens spent, for token_budget.
	Used int64 `json:"used,omitempty"`
	// Detail says which cumulative budget stopped the turn, its window and when it
	// refills (limit "budget").
	Detail string `json:"detail,omitempty"`
}

// RunInterrupted: a run's harness died mid-run; recorded by the next run.
type RunInterrupted struct {
	RunID  string `json:"run_id"`
	Owner  string `json:"owner"`
	Reason string `json:"reason"`
}

// RunFinished ends every run.
type RunFinished struct {
	RunID        string `json:"run_id"`
	Status       string `json:"status"`
	Detail       string `json:"detail"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Steps        int    `json:"steps"`
}

// SandboxProvisioned: a session's sandbox was created.
type SandboxProvisioned struct {
	SandboxID    string `json:"sandbox_id"`
	Provider     string `json:"provider"`
	ProviderType string `json:"provider_type"`
	Environment  string `json:"environment"`
	SnapshotID   string `json:"snapshot_id"`
	Generation   int64  `json:"generation"`
	Reason       string `json:"reason"`
	TookMS       int64  `json:"took_ms"`
	// Limits are the environment's, as asked of the backend.
	Limits sandbox.Limits `json:"limits"`
	// LimitsEnforced: the backend enforces every limit in Limits. When it does not (a
	// local sandbox without a writable cgroup, and require_limits off), UnenforcedLimits
	// says which limits the sandbox runs without, or with only in part, and why; this
	// event is the one place that is recorded, once per sandbox.
	LimitsEnforced   bool                      `json:"limits_enforced"`
	UnenforcedLimits []sandbox.UnenforcedLimit `json:"unenforced_limits,omitempty"`
	// Network summarises the network policy the sandbox got (mode, block_all,
	// allow_domains, secrets: whatever its backend's policy reports).
	Network map[string]any `json:"network"`
	// Version is which version of its environment the sandbox comes from under the
	// environment's rollout, "current" or "previous", and RolloutPercent the rollout's
	// percent; both unset when no rollout applied (none set, or the agent pins a version).
	Version        string `json:"version,omitempty"`
	RolloutPercent int64  `json:"rollout_percent,omitempty"`
}

// SandboxResumed: a stopped or archived sandbox (or one a loss left stopped) was
// started again with its files.
type SandboxResumed struct {
	SandboxID string `json:"sandbox_id"`
	// From is the backend's status before the start; RecordedState the record's.
	From          string `json:"from"`
	RecordedState string `json:"recorded_state"`
	// SnapshotID is what the backend reports, RecordedSnapshotID what the sandbox was
	// created from.
	SnapshotID         string `json:"snapshot_id"`
	RecordedSnapshotID string `json:"recorded_snapshot_id"`
}

// SandboxIdle is the payload of sandbox_stopped, sandbox_archived and sandbox_deleted:
// the reaper moved an idle sandbox to State.
type SandboxIdle struct {
	// State is "stopped", "archived" or "deleted"; it is the kind, not a stored field.
	State       string `json:"-"`
	SandboxID   string `json:"sandbox_id"`
	From        string `json:"from"`
	IdleMinutes int64  `json:"idle_minutes"`
	SnapshotID  string `json:"snapshot_id"`
	// BackendStatus is what the backend said of a lost sandbox before it was moved.
	BackendStatus string `json:"backend_status,omitempty"`
}

// SandboxLost: the sandbox died or failed, or a transition on it never finished; the
// next call recovers or recreates it.
type SandboxLost struct {
	SandboxID string `json:"sandbox_id"`
	// State is the record's state when the loss was seen (running for a call that saw
	// its sandbox die).
	State string `json:"state"`
	// BackendStatus is what the backend said of it ("gone" when it no longer has it);
	// empty when it was not asked.
	BackendStatus string `json:"backend_status,omitempty"`
	// Reason says why it counts as lost (for a call, what the call got).
	Reason string `json:"reason"`
	// Uncertain lists the files a dead call was writing.
	Uncertain []string `json:"uncertain,omitempty"`
}

// legacyLost is how a call that saw its sandbox die recorded it before sandbox_lost
// had one field set: status for backend_status, cause for reason, and, since only a
// running record could be marked so, no state.
type legacyLost struct {
	SandboxLost
	Status string `json:"status"`
	Cause  string `json:"cause"`
}

// SandboxRecovered: a lost sandbox passed its health check and is used again.
type SandboxRecovered struct {
	SandboxID string   `json:"sandbox_id"`
	Uncertain []string `json:"uncertain"`
}

// SandboxReclaimed: commands a dead harness left running were stopped (files kept).
type SandboxReclaimed struct {
	SandboxID string `json:"sandbox_id"`
	DeadOwner string `json:"dead_owner"`
	Reason    string `json:"reason"`
}

// SandboxNetworkReattached is the payload of the legacy kind of that name.
type SandboxNetworkReattached struct {
	SandboxID string `json:"sandbox_id"`
	Reason    string `json:"reason"`
}

// Egress is one decision of a sandbox's egress proxy (it never holds a secret's value).
type Egress egress.Decision

// Unknown is an event of a kind this package does not know (a newer harness's).
type Unknown struct {
	Name string
	Raw  json.RawMessage
}

func (UserMessage) Kind() string              { return KindUserMessage }
func (ModelMessage) Kind() string             { return KindModelMessage }
func (Usage) Kind() string                    { return KindUsage }
func (ToolCall) Kind() string                 { return KindToolCall }
func (ToolResult) Kind() string               { return KindToolResult }
func (Cancelled) Kind() string                { return KindCancelled }
func (Error) Kind() string                    { return KindError }
func (Limit) Kind() string                    { return KindLimit }
func (RunInterrupted) Kind() string           { return KindRunInterrupted }
func (RunFinished) Kind() string              { return KindRunFinished }
func (SandboxProvisioned) Kind() string       { return KindSandboxProvisioned }
func (SandboxResumed) Kind() string           { return KindSandboxResumed }
func (p SandboxIdle) Kind() string            { return "sandbox_" + p.State }
func (SandboxLost) Kind() string              { return KindSandboxLost }
func (SandboxRecovered) Kind() string         { return KindSandboxRecovered }
func (SandboxReclaimed) Kind() string         { return KindSandboxReclaimed }
func (SandboxNetworkReattached) Kind() string { return KindSandboxNetworkReattached }
func (Egress) Kind() string                   { return KindEgress }
func (u Unknown) Kind() string                { return u.Name }

// decoders read each known kind's payload, in every shape it was stored in.
var decoders = map[string]func(json.RawMessage) (Payload, error){
	KindUserMessage:    plain[UserMessage],
	KindModelMessage:   plain[ModelMessage],
	KindUsage:          plain[Usage],
	KindToolCall:       plain[ToolCall],
	KindToolResult:     plain[ToolResult], // Artifact reads its legacy shape itself
	KindCancelled:      plain[Cancelled],
	KindError:          plain[Error],
	KindLimit:          plain[Limit],
	KindRunInterrupted: plain[RunInterrupted],
	KindRunFinished:    plain[RunFinished],

	KindSandboxProvisioned:       plain[SandboxProvisioned],
	KindSandboxResumed:           plain[SandboxResumed],
	KindSandboxStopped:           idle("stopped"),
	KindSandboxArchived:          idle("archived"),
	KindSandboxDeleted:           idle("deleted"),
	KindSandboxLost:              lost,
	KindSandboxRecovered:         plain[SandboxRecovered],
	KindSandboxReclaimed:         plain[SandboxReclaimed],
	KindSandboxNetworkReattached: plain[SandboxNetworkReattached],
	KindEgress:                   plain[Egress],
	KindMCPCall:                  plain[MCPCall],
}

func plain[T Payload](raw json.RawMessage) (Payload, error) {
	var p T
	err := unmarshal(raw, &p)
	return p, err
}

func idle(state string) func(json.RawMessage) (Payload, error) {
	return func(raw json.RawMessage) (Payload, error) {
		p := SandboxIdle{State: state}
		err := unmarshal(raw, &p)
		return p, err
	}
}

func lost(raw json.RawMessage) (Payload, error) {
	var l legacyLost
	if err := unmarshal(raw, &l); err != nil {
		return SandboxLost{}, err
	}
	p := l.SandboxLost
	if l.Status != "" || l.Cause != "" {
		p.BackendStatus, p.Reason = firstSet(p.BackendStatus, l.Status), firstSet(p.Reason, l.Cause)
		if p.State == "" {
			p.State = store.SandboxStateRunning
		}
	}
	return p, nil
}

func firstSet(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func unmarshal(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, v)
}

// Decode reads an event's payload as its kind's type (a value, not a pointer), in any
// shape a harness ever stored it; an unknown kind gives Unknown.
func Decode(kind string, raw []byte) (Payload, error) {
	dec, ok := decoders[kind]
	if !ok {
		return Unknown{Name: kind, Raw: json.RawMessage(raw)}, nil
	}
	p, err := dec(raw)
	if err != nil {
		return p, fmt.Errorf("event %s: %w", kind, err)
	}
	return p, nil
}

// Encode is the stored form of p; a kind this package does not know is refused.
func Encode(p Payload) ([]byte, error) {
	if _, ok := decoders[p.Kind()]; !ok {
		return nil, fmt.Errorf("event kind %q is not one this harness records", p.Kind())
	}
	return json.Marshal(p)
}

// Append encodes p and appends it to a session's log (in run runID, "" for none).
func Append(ctx context.Context, st *store.Store, sessionID, runID string, p Payload) (int64, error) {
	b, err := Encode(p)
	if err != nil {
		return 0, err
	}
	return st.AppendEvent(ctx, sessionID, runID, p.Kind(), b)
}

// Recorder appends an event to a session's log.
type Recorder func(ctx context.Context, sessionID string, p Payload)

// As decodes an event of T's kind as a T; false for any other kind, or a payload that
// does not decode. T's Kind must not depend on its fields (SandboxIdle's does: use
// Decode).
func As[T Payload](kind string, raw []byte) (T, bool) {
	var zero T
	if kind != zero.Kind() {
		return zero, false
	}
	p, err := Decode(kind, raw)
	t, ok := p.(T)
	return t, ok && err == nil
}
