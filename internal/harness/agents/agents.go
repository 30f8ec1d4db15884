// Package agents reads what `terraform apply` published about an agent (its spec, its
// environment and that environment's snapshot and sandbox provider) from the store, and
// builds the agent's model client. The harness never reads HCL.
//
// Defaults the spec does not (yet) carry: MaxTurns 50 model steps per user message and
// TokenBudget 1,000,000 tokens (input + output) per user message. A spec field
// max_turns / token_budget, when the provider publishes one, wins; the CLI flags
// --max-turns and --token-budget override both.
package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model/anthropic"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model/openaicompat"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model/scripted"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Defaults for limits the spec leaves out.
const (
	DefaultMaxTurns    = 50
	DefaultTokenBudget = 1_000_000
)

// Spec is the agent document the provider stores (internal/provider/agent_spec.go),
// decoded with plain values: an absent string reads as "".
type Spec struct {
	Name         string      `json:"name"`
	Description  string      `json:"description"`
	Instructions string      `json:"instructions"`
	Model        ModelSpec   `json:"model"`
	MCPServers   []MCPServer `json:"mcp_servers"`
	Skills       []Skill     `json:"skills"`
	CodeMode     bool        `json:"code_mode"`
	Sandbox      SandboxSpec `json:"sandbox"`
	MaxTurns     int64       `json:"max_turns"`
	TokenBudget  int64       `json:"token_budget"`
}

// ModelSpec names the model and where its key comes from.
type ModelSpec struct {
	Provider  string `json:"provider"` // openai, anthropic, scripted
	Name      string `json:"name"`
	BaseURL   string `json:"base_url"`
	APIKeyEnv string `json:"api_key_env"`
	Script    string `json:"script"`
}

// MCPServer is an MCP server the agent may call; its credential stays in the harness.
type MCPServer struct {
	Name          string   `json:"name"`
	URL           string   `json:"url"`
	CredentialEnv string   `json:"credential_env"`
	AllowedTools  []string `json:"allowed_tools"`
}

// Skill is a skill the agent declares: a name and the path its module gave.
type Skill struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// NotRun names what the spec asks for that this harness does not run yet (Code Mode,
// Skills), so callers can say so instead of silently ignoring it.
func (s Spec) NotRun() []string {
	var out []string
	if s.CodeMode {
		out = append(out, "code_mode")
	}
	if len(s.Skills) > 0 {
		names := make([]string, len(s.Skills))
		for i, sk := range s.Skills {
			names[i] = sk.Name
		}
		out = append(out, "skills ("+strings.Join(names, ", ")+")")
	}
	return out
}

// SandboxSpec holds the sandbox settings and lifecycle timings (minutes).
type SandboxSpec struct {
	Enabled             bool   `json:"enabled"`
	Environment         string `json:"environment"`
	FileDownloads       bool   `json:"file_downloads"`
	IdleStopMinutes     int64  `json:"idle_stop_minutes"`
	ArchiveAfterMinutes int64  `json:"archive_after_minutes"`
	DeleteAfterMinutes  int64  `json:"delete_after_minutes"`
}

// Agent is everything the harness needs to run an agent.
type Agent struct {
	Name  string
	Owner string
	Spec  Spec
	// Environment, Provider and Snapshot are set when the sandbox is enabled.
	Environment store.Environment
	Provider    store.SandboxProvider
	Snapshot    store.Snapshot
}

// ErrNotReady is returned (wrapped) when the agent's environment is missing or its
// snapshot is not Ready.
var ErrNotReady = errors.New("environment not ready")

// Load reads an agent and checks that what it needs is published and Ready.
func Load(ctx context.Context, st *store.Store, name string) (*Agent, error) {
	row, err := st.GetAgent(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		names, _ := st.ListAgentNames(ctx)
		known := "none"
		if len(names) > 0 {
			known = strings.Join(names, ", ")
		}
		return nil, fmt.Errorf("agent %q is not in the control-plane database %s (known agents: %s); declare a trueforge_agent named %q and run terraform apply against the same database: %w",
			name, st.Path(), known, name, err)
	}
	if err != nil {
		return nil, err
	}
	a := &Agent{Name: row.Name, Owner: row.Owner}
	if err := json.Unmarshal(row.Spec, &a.Spec); err != nil {
		return nil, fmt.Errorf("agent %q: the stored spec is not valid JSON (apply the configuration again to rewrite it): %w", name, err)
	}
	if !a.Spec.Sandbox.Enabled {
		return a, nil
	}
	envName := row.Environment
	a.Environment, err = st.GetEnvironment(ctx, envName)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("agent %q: environment %q is missing from the control-plane database; apply a trueforge_environment named %q: %w", name, envName, envName, ErrNotReady)
	}
	if err != nil {
		return nil, err
	}
	a.Snapshot, err = st.GetSnapshot(ctx, a.Environment.SnapshotID)
	if err != nil {
		return nil, fmt.Errorf("agent %q: environment %q points at snapshot %s, which is missing; apply again to rebuild it: %w", name, envName, a.Environment.SnapshotID, ErrNotReady)
	}
	if a.Snapshot.Status != sandbox.StatusReady {
		detail := ""
		if a.Snapshot.Reason != "" {
			detail = " (" + a.Snapshot.Reason + ")"
		}
		return nil, fmt.Errorf("agent %q: environment %q is %s, not Ready%s; wait for its build (terraform apply waits) or fix its build script and apply again: %w",
			name, envName, a.Snapshot.Status, detail, ErrNotReady)
	}
	a.Provider, err = st.GetSandboxProvider(ctx, a.Environment.Provider)
	if err != nil {
		return nil, fmt.Errorf("agent %q: sandbox provider %q of environment %q: %w", name, a.Environment.Provider, envName, err)
	}
	return a, nil
}

// MaxTurns is the model steps allowed per user message.
func (a *Agent) MaxTurns() int64 {
	if a.Spec.MaxTurns > 0 {
		return a.Spec.MaxTurns
	}
	return DefaultMaxTurns
}

// TokenBudget is the tokens allowed per user message.
func (a *Agent) TokenBudget() int64 {
	if a.Spec.TokenBudget > 0 {
		return a.Spec.TokenBudget
	}
	return DefaultTokenBudget
}

// IsReplay reports whether the agent's model is a scripted replay.
func (a *Agent) IsReplay() bool { return a.Spec.Model.Provider == "scripted" }

// ModelOptions are harness-side settings for building a model client.
type ModelOptions struct {
	HTTPClient *http.Client        // nil: the SDK default
	Getenv     func(string) string // nil: os.Getenv
}

// NewModel builds the agent's model client. Keys are not read here but at each call.
func (a *Agent) NewModel(o ModelOptions) (model.Model, error) {
	m := a.Spec.Model
	if err := m.CheckCredential(); err != nil {
		return nil, fmt.Errorf("agent %q: %w", a.Name, err)
	}
	o.HTTPClient = sameHostRedirects(o.HTTPClient)
	switch m.Provider {
	case "openai":
		return openaicompat.New(openaicompat.Config{Model: m.Name, BaseURL: m.BaseURL, KeyEnv: m.APIKeyEnv, HTTPClient: o.HTTPClient, Getenv: o.Getenv})
	case "anthropic":
		return anthropic.New(anthropic.Config{Model: m.Name, BaseURL: m.BaseURL, KeyEnv: m.APIKeyEnv, HTTPClient: o.HTTPClient, Getenv: o.Getenv})
	case "scripted":
		s, err := scripted.Parse([]byte(m.Script))
		if err != nil {
			return nil, fmt.Errorf("agent %q: %w", a.Name, err)
		}
		return scripted.New(s), nil
	}
	return nil, fmt.Errorf("agent %q: model.provider %q is not one of openai, anthropic, scripted", a.Name, m.Provider)
}
