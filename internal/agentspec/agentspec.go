// Package agentspec is the agent document that `terraform apply` stores in the agents
// table and trueforge-harness runs: one JSON type, its defaults and the limits the
// provider enforces, shared by the provider (which writes and reads it back), the
// harness (which reads it) and the harness's test fixtures (which write it).
//
// The JSON format is the one the provider has always written; specs already stored in a
// control plane decode with the same values (see Decode for what older providers left
// out).
package agentspec

import (
	"encoding/json"
)

// Model providers an agent can run on.
const (
	ModelOpenAI    = "openai"
	ModelAnthropic = "anthropic"
	ModelScripted  = "scripted" // replays Model.Script: no key, no network
)

// ModelProviders lists the model providers, sorted.
var ModelProviders = []string{ModelAnthropic, ModelOpenAI, ModelScripted}

// Defaults: what an agent gets for what its configuration leaves out. The provider's
// schema applies them, the harness reads a spec with them (Decode), and the test
// fixtures write them (Default).
const (
	// DefaultMaxTurns is the model steps allowed for one user message (a step is one
	// model reply with the tool calls it makes).
	DefaultMaxTurns = 50
	// DefaultTokenBudget is the tokens (input plus output, summed over the steps) one
	// user message may use.
	DefaultTokenBudget = 1_000_000
	// DefaultEnvironment is the environment sandboxes are cloned from: the one every
	// sandbox provider creates. It is used only when the sandbox is enabled.
	DefaultEnvironment = "default"
	// DefaultFileDownloads lets users download files the agent produces.
	DefaultFileDownloads = true
	// Sandbox lifecycle, in minutes of inactivity: stopped after a quarter of an hour,
	// archived after a day, deleted after a week.
	DefaultIdleStopMinutes     = 15
	DefaultArchiveAfterMinutes = 1440
	DefaultDeleteAfterMinutes  = 10080
)

// Code Mode defaults: what one script (a run of the code tool) may do. A script past
// one of them is stopped (or, for a call timeout, gets an error from that call) and the
// model is told which limit and which attribute raises it.
const (
	// DefaultCodeCallTimeoutSeconds bounds one MCP call a script makes.
	DefaultCodeCallTimeoutSeconds = 30
	// DefaultCodeRunTimeoutSeconds bounds a script's wall-clock time, calls included.
	DefaultCodeRunTimeoutSeconds = 300
	// DefaultCodeMaxCalls is how many MCP calls one script may make.
	DefaultCodeMaxCalls = 100
	// DefaultCodeMaxResultBytes is how many bytes of MCP results (as JSON) one script
	// may receive, all calls together; each result is minimized first.
	DefaultCodeMaxResultBytes = 1 << 20
)

// Bounds of the Code Mode limits, enforced by the provider.
const (
	MaxCodeCallTimeoutSeconds = 600
	MaxCodeRunTimeoutSeconds  = 3600
	MaxCodeMaxCalls           = 10_000
	MaxCodeMaxResultBytes     = 64 << 20
)

// extract_archive defaults: what one archive may unpack to (package archive enforces
// them while it reads). Enough for a source tree or a data set, far below what a
// decompression bomb unpacks to: 1 GiB of zeros is 1 MiB as gzip and 32 KiB as zstd.
const (
	// DefaultExtractMaxEntries is how many entries of one archive are looked at.
	DefaultExtractMaxEntries = 10_000
	// DefaultExtractMaxBytes is how many bytes one archive may unpack to in all.
	DefaultExtractMaxBytes = 1 << 30
	// DefaultExtractMaxRatio is how many times its compressed size an archive may unpack
	// to (checked once a stream has unpacked 1 MiB).
	DefaultExtractMaxRatio = 100
)

// Bounds of the extract limits, enforced by the provider.
const (
	MaxExtractMaxEntries = 1_000_000
	MaxExtractMaxBytes   = 64 << 30
	MaxExtractMaxRatio   = 100_000
)

// Bounds of the run limits, enforced by the provider.
const (
	MaxMaxTurns    = 1000
	MinTokenBudget = 1000
	MaxTokenBudget = 100_000_000
)

// Spec is the stored agent document. Its field names are the HCL attributes'. Optional
// strings are pointers and lists keep nil apart from empty, so the provider reads back
// exactly what the configuration said (an omitted description is absent, `""` is
// stored as ""); readers that do not care use Text.
type Spec struct {
	Name         string      `json:"name"`
	Description  *string     `json:"description,omitempty"`
	Instructions *string     `json:"instructions,omitempty"`
	Model        Model       `json:"model"`
	MCPServers   []MCPServer `json:"mcp_servers"`
	Skills       []Skill     `json:"skills"`
	CodeMode     bool        `json:"code_mode"`
	// CodeModeLimits bound each Code Mode script; absent from specs written before they
	// existed (CodeLimits reads the defaults then), so those specs encode as they were stored.
	CodeModeLimits *CodeModeLimits `json:"code_mode_limits,omitempty"`
	Sandbox        Sandbox         `json:"sandbox"`
	MaxTurns       int64           `json:"max_turns"`
	TokenBudget    int64           `json:"token_budget"`
}

// Model names the model and the credential that is its key: APIKeyCredential names a
// credential of the harness operator's; APIKeyEnv, the older form, names a harness
// variable (at most one of the two is set).
type Model struct {
	Provider         string  `json:"provider"` // one of ModelProviders
	Name             *string `json:"name,omitempty"`
	BaseURL          *string `json:"base_url,omitempty"`
	APIKeyCredential *string `json:"api_key_credential,omitempty"`
	APIKeyEnv        *string `json:"api_key_env,omitempty"`
	Script           *string `json:"script,omitempty"`
}

// MCPServer is an MCP server the agent may call; its credential stays in the harness.
// Credential names a credential of the harness operator's; CredentialEnv, the older
// form, names a harness variable (at most one of the two is set). AllowedTools nil
// means every tool the server offers.
type MCPServer struct {
	Name          string   `json:"name"`
	URL           string   `json:"url"`
	Credential    *string  `json:"credential,omitempty"`
	CredentialEnv *string  `json:"credential_env,omitempty"`
	AllowedTools  []string `json:"allowed_tools"`
}

// Skill is a skill the agent declares: its name, the path of its folder in the
// configuration that published it (for display: the harness never reads it), and what
// apply read there. Digest is the SHA-256 of the folder's canonical encoding (package
// skills), by which its content is stored in the control plane (skill_blobs); it and
// Description are absent from specs written before skills were published, whose skills
// the harness cannot load until they are applied again.
type Skill struct {
	Name        string `json:"name"`
	Path        string `json:"path"`
	Description string `json:"description,omitempty"`
	Digest      string `json:"digest,omitempty"`
}

// Sandbox holds the sandbox settings and lifecycle timings (minutes). Environment is
// kept as configured even when the sandbox is off, but only an enabled sandbox uses or
// references it (see EnvironmentRef).
type Sandbox struct {
	Enabled bool `json:"enabled"`
	// ApproveCode holds every script (run_code) and command (exec) until the session's
	// user has read and approved it.
	ApproveCode bool   `json:"approve_code,omitempty"`
	Environment string `json:"environment"`
	// EnvironmentVersion pins the agent's new sandboxes to one kept version of
	// Environment (its build hash or snapshot id); "" follows the current version.
	EnvironmentVersion  string `json:"environment_version,omitempty"`
	FileDownloads       bool   `json:"file_downloads"`
	IdleStopMinutes     int64  `json:"idle_stop_minutes"`
	ArchiveAfterMinutes int64  `json:"archive_after_minutes"`
	DeleteAfterMinutes  int64  `json:"delete_after_minutes"`
	// ExtractLimits bound each archive extract_archive unpacks; absent from specs
	// written before they existed (Extract reads the defaults then), so those specs
	// encode as they were stored.
	ExtractLimits *ExtractLimits `json:"extract_limits,omitempty"`
}

// ExtractLimits are the agent's sandbox.extract_limits: how many entries one archive may
// have, how many bytes it may unpack to, and how many times its compressed size.
type ExtractLimits struct {
	MaxEntries int64 `json:"max_entries"`
	MaxBytes   int64 `json:"max_bytes"`
	MaxRatio   int64 `json:"max_ratio"`
}

// DefaultExtractLimits are the limits of an agent that sets none.
func DefaultExtractLimits() ExtractLimits {
	return ExtractLimits{MaxEntries: DefaultExtractMaxEntries, MaxBytes: DefaultExtractMaxBytes, MaxRatio: DefaultExtractMaxRatio}
}

// Extract is the sandbox's extract limits, each one it leaves out (or that is not
// positive) at its default.
func (sb Sandbox) Extract() ExtractLimits {
	l := DefaultExtractLimits()
	if e := sb.ExtractLimits; e != nil {
		for _, f := range []struct{ v, dst *int64 }{{&e.MaxEntries, &l.MaxEntries}, {&e.MaxBytes, &l.MaxBytes}, {&e.MaxRatio, &l.MaxRatio}} {
			if *f.v > 0 {
				*f.dst = *f.v
			}
		}
	}
	return l
}

// CodeModeLimits are the agent's code_mode_limits: per-call and per-script timeouts, and
// caps on the calls and the result bytes of one script.
type CodeModeLimits struct {
	CallTimeoutSeconds int64 `json:"call_timeout_seconds"`
	RunTimeoutSeconds  int64 `json:"run_timeout_seconds"`
	MaxCalls           int64 `json:"max_calls"`
	MaxResultBytes     int64 `json:"max_result_bytes"`
}

// DefaultCodeModeLimits are the limits of an agent that sets none.
func DefaultCodeModeLimits() CodeModeLimits {
	return CodeModeLimits{
		CallTimeoutSeconds: DefaultCodeCallTimeoutSeconds,
		RunTimeoutSeconds:  DefaultCodeRunTimeoutSeconds,
		MaxCalls:           DefaultCodeMaxCalls,
		MaxResultBytes:     DefaultCodeMaxResultBytes,
	}
}

// DefaultSandbox is the sandbox block of an agent that has none: off.
func DefaultSandbox() Sandbox {
	return Sandbox{
		Enabled:             false,
		Environment:         DefaultEnvironment,
		FileDownloads:       DefaultFileDownloads,
		IdleStopMinutes:     DefaultIdleStopMinutes,
		ArchiveAfterMinutes: DefaultArchiveAfterMinutes,
		DeleteAfterMinutes:  DefaultDeleteAfterMinutes,
	}
}

// Default is the spec of an agent named name whose configuration sets nothing else (the
// model is left for the caller): every default applied.
func Default(name string) Spec {
	return Spec{Name: name, Sandbox: DefaultSandbox(), MaxTurns: DefaultMaxTurns, TokenBudget: DefaultTokenBudget}
}

// Decode reads a stored spec. What a spec leaves out reads as its default, and so does
// a limit or timing that is not positive (max_turns and token_budget are absent from
// specs written before they existed; the harness never ran a zero limit or timing). A
// field this package does not know is ignored, so an older harness reads a newer spec.
func Decode(raw []byte) (Spec, error) {
	s := Default("")
	if err := json.Unmarshal(raw, &s); err != nil {
		return Spec{}, err
	}
	s.fillZeros()
	return s, nil
}

// fillZeros replaces limits and timings that are not positive with their defaults.
func (s *Spec) fillZeros() {
	orDefault := func(v *int64, def int64) {
		if *v <= 0 {
			*v = def
		}
	}
	orDefault(&s.MaxTurns, DefaultMaxTurns)
	orDefault(&s.TokenBudget, DefaultTokenBudget)
	orDefault(&s.Sandbox.IdleStopMinutes, DefaultIdleStopMinutes)
	orDefault(&s.Sandbox.ArchiveAfterMinutes, DefaultArchiveAfterMinutes)
	orDefault(&s.Sandbox.DeleteAfterMinutes, DefaultDeleteAfterMinutes)
}

// CodeLimits are the spec's Code Mode limits, each one it leaves out (or that is not
// positive) at its default.
func (s Spec) CodeLimits() CodeModeLimits {
	l := DefaultCodeModeLimits()
	if c := s.CodeModeLimits; c != nil {
		for _, f := range []struct{ v, dst *int64 }{
			{&c.CallTimeoutSeconds, &l.CallTimeoutSeconds}, {&c.RunTimeoutSeconds, &l.RunTimeoutSeconds},
			{&c.MaxCalls, &l.MaxCalls}, {&c.MaxResultBytes, &l.MaxResultBytes},
		} {
			if *f.v > 0 {
				*f.dst = *f.v
			}
		}
	}
	return l
}

// Encode is the stored form of s.
func (s Spec) Encode() []byte {
	raw, err := json.Marshal(s)
	if err != nil {
		// Only strings, numbers, bools and slices of them: Marshal cannot fail.
		panic("agentspec: encoding a spec: " + err.Error())
	}
	return raw
}

// EnvironmentRef is the environment the agent references, which the agents table
// enforces: the sandbox's environment when the sandbox is enabled, and none ("") when
// it is off, so an agent without a sandbox needs no environment or sandbox provider to
// exist, and never keeps one from being deleted.
func (s Spec) EnvironmentRef() string {
	if !s.Sandbox.Enabled {
		return ""
	}
	return s.Sandbox.Environment
}

// Text is an optional string's value, "" when it is absent.
func Text(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
