// Package agents reads what `terraform apply` published about an agent (its spec, its
// environment and that environment's snapshot and sandbox provider) from the store, and
// builds the agent's model client. The harness never reads HCL.
//
// The stored spec is internal/agentspec's, decoded there with its defaults (50 model
// steps and 1,000,000 tokens per user message, the sandbox off); the CLI flags
// --max-turns and --token-budget override the agent's limits.
package agents

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model/anthropic"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model/openaicompat"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model/scripted"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Spec is an agent's stored spec (agentspec.Spec) as the harness runs it: decoded with
// every default applied (SpecOf), and with optional strings read as "" since the
// harness treats an omitted value and an empty one alike.
type Spec struct {
	Name         string
	Description  string
	Instructions string
	Model        ModelSpec
	MCPServers   []MCPServer
	Skills       []Skill
	CodeMode     bool
	// CodeLimits are the Code Mode limits, every one set (defaults applied).
	CodeLimits  agentspec.CodeModeLimits
	Sandbox     SandboxSpec
	MaxTurns    int64
	TokenBudget int64
}

// ModelSpec names the model and where its key comes from: a credential of the
// operator's (APIKeyCredential) or, in the older form, a harness variable (APIKeyEnv);
// see Authority.
type ModelSpec struct {
	Provider         string // agentspec.ModelOpenAI, ModelAnthropic or ModelScripted
	Name             string
	BaseURL          string
	APIKeyCredential string
	APIKeyEnv        string
	Script           string
}

// MCPServer is an MCP server the agent may call; its credential stays in the harness.
// Credential names a credential of the operator's, CredentialEnv (the older form) a
// harness variable; see Authority.
type MCPServer struct {
	Name          string
	URL           string
	Credential    string
	CredentialEnv string
	AllowedTools  []string // nil: every tool (allowed_tools omitted or empty)
}

// Skill is a skill the agent declares: its name, description and the digest of its
// published content (load_skill reads it from the store by that digest).
type Skill = agentspec.Skill

// SandboxSpec holds the sandbox settings and lifecycle timings (minutes).
type SandboxSpec = agentspec.Sandbox

// SpecOf is the harness's reading of a stored spec.
func SpecOf(s agentspec.Spec) Spec {
	out := Spec{
		Name:         s.Name,
		Description:  agentspec.Text(s.Description),
		Instructions: agentspec.Text(s.Instructions),
		Model: ModelSpec{
			Provider: s.Model.Provider, Name: agentspec.Text(s.Model.Name), BaseURL: agentspec.Text(s.Model.BaseURL),
			APIKeyCredential: agentspec.Text(s.Model.APIKeyCredential),
			APIKeyEnv:        agentspec.Text(s.Model.APIKeyEnv), Script: agentspec.Text(s.Model.Script),
		},
		Skills:      s.Skills,
		CodeMode:    s.CodeMode,
		CodeLimits:  s.CodeLimits(),
		Sandbox:     s.Sandbox,
		MaxTurns:    s.MaxTurns,
		TokenBudget: s.TokenBudget,
	}
	for _, m := range s.MCPServers {
		srv := MCPServer{Name: m.Name, URL: m.URL, Credential: agentspec.Text(m.Credential), CredentialEnv: agentspec.Text(m.CredentialEnv)}
		if len(m.AllowedTools) > 0 {
			// The provider documents an empty list as every tool, as an omitted one is.
			srv.AllowedTools = m.AllowedTools
		}
		out.MCPServers = append(out.MCPServers, srv)
	}
	return out
}

// Agent is everything the harness needs to run an agent.
type Agent struct {
	Name  string
	Owner string
	Spec  Spec
	// Environment, Provider and Snapshot are set when the sandbox is enabled; an agent
	// whose sandbox is off needs none of them, nor any sandbox provider at all.
	Environment store.Environment
	Provider    store.SandboxProvider
	Snapshot    store.Snapshot
	// script is the scripted model's replay already parsed (Specs), nil to parse it in
	// NewModel. A Script is only read, so agents share one.
	script *scripted.Script
}

// ErrNotReady is returned (wrapped) when the agent's environment is missing or its
// snapshot is not Ready, or its stored spec is past the provider's bounds.
var ErrNotReady = errors.New("environment not ready")

// Load reads an agent and checks that what it needs is published and Ready.
func Load(ctx context.Context, st *store.Store, name string) (*Agent, error) {
	return (*Specs)(nil).Load(ctx, st, name)
}

// Load is the package's Load, decoding the agent's stored spec only when it differs from
// the one decoded last for that agent (c nil: always). The row, and what it names, are
// read every time, so each call runs the agent as applied now.
func (c *Specs) Load(ctx context.Context, st *store.Store, name string) (*Agent, error) {
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
	d, err := c.decode(name, row.Spec)
	if err != nil {
		return nil, err
	}
	a := &Agent{Name: row.Name, Owner: row.Owner, Spec: d.spec, script: d.script}
	if !a.Spec.Sandbox.Enabled {
		// A Q&A agent: no environment, snapshot or sandbox provider is read.
		return a, nil
	}
	if err := a.resolve(ctx, st, row.Environment); err != nil {
		return nil, err
	}
	if err := a.pinVersion(ctx, st); err != nil { // environment_version.go
		return nil, err
	}
	return a, nil
}

// resolve sets the agent's environment, its snapshot and its sandbox provider from
// environment envName, which must be Ready.
func (a *Agent) resolve(ctx context.Context, st *store.Store, envName string) error {
	name := a.Name
	env, err := st.GetEnvironment(ctx, envName)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("agent %q: environment %q is missing from the control-plane database; apply a trueforge_environment named %q: %w", name, envName, envName, ErrNotReady)
	}
	if err != nil {
		return err
	}
	// An agent pinned to a version of this environment (pinVersion) does not use its
	// current snapshot, which may be building or failed meanwhile.
	pinned := a.Spec.Sandbox.EnvironmentVersion != "" && envName == a.Spec.Sandbox.Environment
	snap, err := st.GetSnapshot(ctx, env.SnapshotID)
	if err != nil && !pinned {
		return fmt.Errorf("agent %q: environment %q points at snapshot %s, which is missing; apply again to rebuild it: %w", name, envName, env.SnapshotID, ErrNotReady)
	}
	if snap.Status != sandbox.StatusReady && !pinned {
		detail := ""
		if snap.Reason != "" {
			detail = " (" + snap.Reason + ")"
		}
		return fmt.Errorf("agent %q: environment %q is %s, not Ready%s; wait for its build (terraform apply waits) or fix its build script and apply again: %w",
			name, envName, snap.Status, detail, ErrNotReady)
	}
	prov, err := st.GetSandboxProvider(ctx, env.Provider)
	if err != nil {
		return fmt.Errorf("agent %q: sandbox provider %q of environment %q: %w", name, env.Provider, envName, err)
	}
	a.Environment, a.Snapshot, a.Provider = env, snap, prov
	return nil
}

// WithEnvironment is the agent with its sandboxes made from environment envName instead
// of its own (a session's one-off environment, store.Session.Environment): a copy, its
// spec unchanged, refused unless the agent has a sandbox and envName is Ready.
func (a *Agent) WithEnvironment(ctx context.Context, st *store.Store, envName string) (*Agent, error) {
	if !a.Spec.Sandbox.Enabled {
		return nil, fmt.Errorf("agent %q has no sandbox (sandbox.enabled is false), so it cannot run on environment %q", a.Name, envName)
	}
	if envName == a.Environment.Name {
		return a, nil
	}
	c := *a
	if err := c.resolve(ctx, st, envName); err != nil {
		return nil, err
	}
	return &c, nil
}

// MaxTurns is the model steps allowed per user message.
func (a *Agent) MaxTurns() int64 { return positiveOr(a.Spec.MaxTurns, agentspec.DefaultMaxTurns) }

// TokenBudget is the tokens allowed per user message.
func (a *Agent) TokenBudget() int64 {
	return positiveOr(a.Spec.TokenBudget, agentspec.DefaultTokenBudget)
}

// positiveOr is v, or def for an Agent built without Load (whose spec has no defaults).
func positiveOr(v, def int64) int64 {
	if v > 0 {
		return v
	}
	return def
}

// IsReplay reports whether the agent's model is a scripted replay.
func (a *Agent) IsReplay() bool { return a.Spec.Model.Provider == agentspec.ModelScripted }

// ModelOptions are harness-side settings for building a model client.
type ModelOptions struct {
	HTTPClient *http.Client        // nil: the SDK default
	Getenv     func(string) string // nil: os.Getenv
	// Credentials decides whether the model's key may be sent to its endpoint; the
	// zero Authority sends none (a scripted model needs none).
	Credentials Authority
}

// NewModel builds the agent's model client. Keys are not read here but at each call,
// from the variable of the credential o.Credentials grants for the model's endpoint.
func (a *Agent) NewModel(o ModelOptions) (model.Model, error) {
	m := a.Spec.Model
	grant, err := m.AuthorizeKey(o.Credentials)
	if err != nil {
		return nil, fmt.Errorf("agent %q: %w", a.Name, err)
	}
	o.HTTPClient = sameHostRedirects(o.HTTPClient)
	endpoint := model.Endpoint{Model: m.Name, BaseURL: m.BaseURL, KeyEnv: grant.Env, HTTPClient: o.HTTPClient, Getenv: o.Getenv}
	switch m.Provider {
	case agentspec.ModelOpenAI:
		return openaicompat.New(endpoint)
	case agentspec.ModelAnthropic:
		return anthropic.New(endpoint)
	case agentspec.ModelScripted:
		if a.script != nil {
			return scripted.New(a.script), nil
		}
		s, err := scripted.Parse([]byte(m.Script))
		if err != nil {
			return nil, fmt.Errorf("agent %q: %w", a.Name, err)
		}
		return scripted.New(s), nil
	}
	return nil, fmt.Errorf("agent %q: model.provider %q is not one of %s", a.Name, m.Provider, strings.Join(agentspec.ModelProviders, ", "))
}
