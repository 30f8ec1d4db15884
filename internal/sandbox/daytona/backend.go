package daytona

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Type is the sandbox provider type of this backend.
const Type = "daytona"

// Scopes are what an API key needs: trueforge builds snapshots, creates sandboxes from
// them and syncs secrets. Saving a provider fails, naming each one missing, without
// them. DeleteScopes are used too (retrying a failed build, collecting unused snapshots,
// deleting sandboxes) but only warned about: the product asks for the three.
var (
	Scopes       = sandbox.RequiredScopes
	DeleteScopes = []string{"delete:snapshots", "delete:sandboxes"}
)

// LabelPlane is the label naming the control plane a sandbox belongs to
// (sandbox.ProviderConfig.Plane), so that two control planes sharing one Daytona
// organization never list, and so never sweep, each other's sandboxes.
const LabelPlane = "trueforge.plane"

// Daytona's limits that an environment can hit. MaxDomains is the API's hard limit on
// domainAllowList entries (400 at sandbox creation otherwise); the size figures are the
// default per-sandbox caps of a Daytona organization, which an organization may have
// raised, so exceeding them only warns.
const (
	MaxDomains  = 10
	DefaultCPU  = 4
	DefaultMem  = 8
	DefaultDisk = 10
)

// Backend is the Daytona backend (sandbox.Backend): snapshots, sandboxes and secrets of
// a Daytona organization through its API.
type Backend struct {
	// Options are added to every client (tests shorten polling and backoff).
	Options []Option
	// WorkDir, when set, replaces DefaultWorkDir as the sandboxes' workspace.
	WorkDir string
}

var _ sandbox.Backend = (*Backend)(nil)

// NewBackend returns the Daytona backend with client options opts.
func NewBackend(opts ...Option) *Backend { return &Backend{Options: opts} }

// Info describes the backend.
func (b *Backend) Info() sandbox.Info {
	return sandbox.Info{
		Type:          Type,
		Title:         "Daytona",
		Description:   "Daytona sandboxes, snapshots and secrets through the Daytona API.",
		NeedsAPIKey:   true,
		DefaultAPIURL: DefaultBaseURL,
		Capabilities:  sandbox.Capabilities{NetworkByBackend: true, RemoteSnapshots: true},
	}
}

// Client returns a client for p's API (api_url, else Daytona's) with p's key and target.
func (b *Backend) Client(p sandbox.ProviderConfig) *Client {
	url := p.APIURL
	if url == "" {
		url = DefaultBaseURL
	}
	return New(url, p.APIKey, append([]Option{WithTarget(p.Target)}, b.Options...)...)
}

func (b *Backend) keyed(p sandbox.ProviderConfig) (*Client, error) {
	if p.APIKey == "" {
		return nil, fmt.Errorf("sandbox provider %q has no stored API key; set api_key_wo (with a new api_key_wo_version) or api_key and apply", p.Name)
	}
	return b.Client(p), nil
}

// CheckCredentials asks Daytona about the key (GET /api-keys/current): it refuses a key
// Daytona rejects or one without every scope in Scopes (naming each missing one), and
// warns about a key that cannot delete.
func (b *Backend) CheckCredentials(ctx context.Context, p sandbox.ProviderConfig) ([]string, []sandbox.Problem) {
	if p.APIKey == "" {
		return nil, []sandbox.Problem{{Attribute: "api_key", Summary: "Missing API Key",
			Detail: "Type daytona needs an API key. Set api_key_wo (with api_key_wo_version) or api_key."}}
	}
	c := b.Client(p)
	k, err := c.RequirePermissions(ctx, Scopes...)
	var miss *MissingPermissionsError
	switch {
	case errors.As(err, &miss):
		return nil, []sandbox.Problem{{Attribute: "api_key", Summary: "Daytona API Key Missing Scopes", Detail: MissingScopesDetail(miss.KeyName, miss.Missing)}}
	case hasStatus(err, http.StatusUnauthorized) && looksLikeJWT(p.APIKey):
		// GET /api-keys/current takes API keys only; Daytona answers a JWT there with
		// 401 "Invalid credentials" (global-auth.guard.ts, v0.190), like a bad key.
		return nil, []sandbox.Problem{{Attribute: "api_key", Summary: "Daytona API Key Required",
			Detail: fmt.Sprintf("api_key looks like a JWT (a Daytona dashboard or OpenID Connect token), not an API key, and Daytona at %s refused it (401): "+
				"trueforge authenticates with an API key, and Daytona checks its scopes with GET /api-keys/current, which takes API keys only. "+
				"Create an API key (dtn_...) in the Daytona dashboard (API Keys), set it as api_key_wo (with a new api_key_wo_version) or api_key, and apply again. Nothing was stored.\n\nOriginal Error: %s", c.BaseURL(), err)}}
	case hasStatus(err, http.StatusUnauthorized):
		return nil, []sandbox.Problem{{Attribute: "api_key", Summary: "Invalid Daytona API Key",
			Detail: fmt.Sprintf("Daytona at %s rejected the API key (401): it is unknown, expired or revoked there. Check that the key is current and belongs to this API, then apply again. Nothing was stored.\n\nOriginal Error: %s", c.BaseURL(), err)}}
	case hasStatus(err, http.StatusForbidden):
		return nil, []sandbox.Problem{{Attribute: "api_key", Summary: "Daytona API Key Refused",
			Detail: fmt.Sprintf("Daytona at %s would not describe the API key (403). Check that the key belongs to the organization this API serves, then apply again. Nothing was stored.\n\nOriginal Error: %s", c.BaseURL(), err)}}
	case err != nil:
		return nil, []sandbox.Problem{{Attribute: "api_url", Summary: "Unable To Reach Daytona",
			Detail: fmt.Sprintf("Checking the API key at %s failed. Check api_url and the network, then apply again. Nothing was stored.\n\nOriginal Error: %s", c.BaseURL(), err)}}
	}
	var cannot []string
	for _, scope := range DeleteScopes {
		if !slices.Contains(k.Permissions, scope) {
			cannot = append(cannot, scope)
		}
	}
	var problems []sandbox.Problem
	if len(cannot) > 0 {
		// Without them a failed snapshot cannot be rebuilt under its name, old snapshots
		// pile up, and sandboxes are never deleted (the harness deletes them; Daytona
		// itself never does).
		problems = append(problems, sandbox.Problem{Attribute: "api_key", Warning: true, Summary: "Daytona API Key Cannot Delete",
			Detail: fmt.Sprintf("The Daytona API key %q lacks %s. It is accepted, but trueforge then cannot delete snapshots (retry a failed build "+
				"with the same inputs, collect unused snapshots, delete the provider's) or sandboxes (the harness's idle delete "+
				"and cleanup of failed creates), so those pile up in your Daytona organization. Add the scope(s) to the key, "+
				"or change triggers to retry a failed build.", k.Name, strings.Join(cannot, " and "))})
	}
	return k.Permissions, problems
}

// jwtShape is a JWT: three base64url parts (Daytona API keys are dtn_ and hex).
var jwtShape = regexp.MustCompile(`^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$`)

func looksLikeJWT(token string) bool { return jwtShape.MatchString(strings.TrimSpace(token)) }

// MissingScopesDetail is the detail of the missing-scope refusal: every missing scope by
// name, the full set needed and what to do.
func MissingScopesDetail(keyName string, missing []string) string {
	return fmt.Sprintf("The Daytona API key %q lacks the scope(s) %s. trueforge needs %s: it builds snapshots, "+
		"creates sandboxes from them and syncs secrets. Create a key with those scopes in the Daytona dashboard "+
		"(API Keys), set it as api_key_wo (with a new api_key_wo_version) or api_key, and apply again. Nothing was stored.",
		keyName, strings.Join(missing, ", "), strings.Join(Scopes, ", "))
}

// CheckEnvironment reports what Daytona would refuse when the environment's sandboxes
// are created: more allowed domains than domainAllowList takes or one it refuses (errors),
// and sizes above an organization's default caps (a warning: they may have been raised).
func (b *Backend) CheckEnvironment(_ context.Context, _ sandbox.ProviderConfig, env sandbox.EnvironmentSpec) []sandbox.Problem {
	problems := checkAllowDomains(env)                    // domains.go
	problems = append(problems, checkCIDRs(env)...)       // lifecycle.go
	problems = append(problems, checkBuildInputs(env)...) // buildcheck.go
	var sizes []string
	if v := env.Spec.CPU; v > DefaultCPU {
		sizes = append(sizes, fmt.Sprintf("cpu = %d (default cap %d)", v, DefaultCPU))
	}
	if v := env.Spec.MemoryGB; v > DefaultMem {
		sizes = append(sizes, fmt.Sprintf("memory = %d GB (default cap %d)", v, DefaultMem))
	}
	if v := env.Spec.DiskGB; v > DefaultDisk {
		sizes = append(sizes, fmt.Sprintf("disk = %d GB (default cap %d)", v, DefaultDisk))
	}
	if len(sizes) > 0 {
		problems = append(problems, sandbox.Problem{Warning: true, Summary: "Sandbox Size Above Daytona's Default Limits",
			Detail: fmt.Sprintf("Environment %q asks for %v. Daytona organizations are limited to %d CPUs, %d GB memory and %d GB disk per sandbox unless their limits were raised; otherwise the snapshot build fails with a quota error.",
				env.Name, sizes, DefaultCPU, DefaultMem, DefaultDisk)})
	}
	return problems
}

// Builder returns the snapshot builder of provider p.
func (b *Backend) Builder(_ context.Context, p sandbox.ProviderConfig) (sandbox.SnapshotBuilder, error) {
	c, err := b.keyed(p)
	if err != nil {
		return nil, err
	}
	return NewBuilder(c), nil
}

// Runtime returns the sandbox runtime of provider p with the package defaults
// (Default*), its sandboxes labelled with the control plane.
func (b *Backend) Runtime(_ context.Context, p sandbox.ProviderConfig) (sandbox.Runtime, error) {
	c, err := b.keyed(p)
	if err != nil {
		return nil, err
	}
	return &Runtime{C: c, WorkDir: b.WorkDir, Labels: map[string]string{LabelPlane: p.Plane}}, nil
}

// Secrets returns the organization's secret store.
func (b *Backend) Secrets(_ context.Context, p sandbox.ProviderConfig) (sandbox.SecretStore, error) {
	c, err := b.keyed(p)
	if err != nil {
		return nil, err
	}
	return secretStore{c}, nil
}
