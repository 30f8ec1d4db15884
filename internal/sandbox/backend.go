package sandbox

import (
	"context"
	"time"
)

// Backend is one sandbox provider type (local, daytona): everything the provider and the
// harness need from it, so that neither compares a provider's type nor imports a backend
// package (internal/backends maps types to Backends). A Backend holds no state of any one
// provider: each call gets the provider's settings (ProviderConfig).
type Backend interface {
	// Info describes the type: what the catalog shows and what its backend can do.
	Info() Info
	// CheckCredentials validates a provider's settings and API key before anything is
	// stored. It returns the scopes the key grants (kept in state) and problems: any that
	// is not a warning refuses the provider.
	CheckCredentials(ctx context.Context, p ProviderConfig) (scopes []string, problems []Problem)
	// CheckEnvironment reports, at plan time and again before a build, what the backend
	// would refuse or not honour about an environment of provider p. p's API key may be
	// empty: the check reads nothing remote.
	CheckEnvironment(ctx context.Context, p ProviderConfig, env EnvironmentSpec) []Problem
	// Builder returns the snapshot builder of provider p.
	Builder(ctx context.Context, p ProviderConfig) (SnapshotBuilder, error)
	// Runtime returns the sandbox runtime of provider p.
	Runtime(ctx context.Context, p ProviderConfig) (Runtime, error)
	// Secrets returns the backend's own secret store, or nil when the backend has none
	// and the harness's egress proxy puts secrets into requests (Info.Capabilities).
	Secrets(ctx context.Context, p ProviderConfig) (SecretStore, error)
	// Volumes returns the provider's volume store (volumes.go).
	Volumes(ctx context.Context, p ProviderConfig) (VolumeStore, error)
	// Registries returns the provider's registry store, or an error wrapping
	// ErrUnsupported that says why the backend has none.
	Registries(ctx context.Context, p ProviderConfig) (RegistryStore, error)
}

// RegistryChecker is implemented by backends that say, before anything is sent, what
// they would refuse about a private registry (RegistryStore) and about the images an
// environment pulls with it, so that the provider checks registries at plan, and again
// before it creates or changes one, without knowing any backend's rules.
type RegistryChecker interface {
	// CheckRegistry reports what the backend refuses about registry r of provider p:
	// a URL it does not take (attribute "url"), or registries at all
	// ("sandbox_provider").
	CheckRegistry(p ProviderConfig, r RegistrySpec) []Problem
	// RegistryURL is url as the backend keeps it, which is what reading the registry
	// back gives.
	RegistryURL(url string) string
	// CheckRegistryImage reports an image (attribute "image") that the backend would
	// not pull with the credentials of registry name, of URL url.
	CheckRegistryImage(name, url, image string) []Problem
}

// RequiredScopes are what a sandbox provider's credentials must grant: trueforge builds
// and clones snapshots, creates sandboxes from them and syncs secrets, so saving a
// provider fails when any is missing (a backend's CheckCredentials names each one).
var RequiredScopes = []string{"write:sandboxes", "write:snapshots", "manage:secrets"}

// LimitsOf is what a sandbox of an environment with spec asks of its runtime: the
// environment's CPUs, memory and disk.
func LimitsOf(spec SnapshotSpec) Limits {
	return Limits{CPU: spec.CPU, MemoryMB: spec.MemoryGB * 1024, DiskMB: spec.DiskGB * 1024}
}

// Info describes a backend.
type Info struct {
	Type string
	// Title names the backend in messages ("Daytona").
	Title       string
	Description string
	// NeedsAPIKey: api_key (or api_key_wo) is required.
	NeedsAPIKey bool
	// DefaultAPIURL is used when a provider sets no api_url.
	DefaultAPIURL string
	Capabilities  Capabilities
}

// Capabilities are the real differences between backends, declared by each backend so
// that callers never have to find them out.
type Capabilities struct {
	// NetworkByBackend: the backend enforces a sandbox's network policy itself
	// (CreateRequest.BlockNetwork, AllowDomains, and Secrets by SecretStore.Name). Without
	// it the harness routes the sandbox through its egress proxy (CreateRequest.Egress).
	NetworkByBackend bool
	// RemoteSnapshots: snapshots live in a remote service that may delete or deactivate
	// them outside trueforge, and that may not answer: a refresh reads them (the default
	// environment's too), and a refresh that fails is an error, not a failed build.
	RemoteSnapshots bool
	// HostLimits: the backend enforces a sandbox's limits on this host itself, and may
	// find the host unable to enforce some; a provider's require_limits then says
	// whether such a sandbox is refused or runs with the limits that can be enforced.
	// Without it the backend gives every sandbox exactly its snapshot's resources.
	HostLimits bool
}

// ProviderConfig is a sandbox provider as its backend is opened with it.
type ProviderConfig struct {
	Name string
	Type string
	// APIURL is the provider's api_url ("" for the backend's default).
	APIURL string
	// APIKey is the opened API key, in memory only ("" when there is none, or at plan
	// time).
	APIKey string
	Target string
	// RequireLimits is the local backend's require_limits (nil: unset).
	RequireLimits *bool
	// DataDir is the control plane's data directory: a backend that keeps files on this
	// host keeps them under it.
	DataDir string
	// Plane identifies the control plane; remote objects are labelled with it.
	Plane string
}

// EnvironmentSpec is what CheckEnvironment looks at.
type EnvironmentSpec struct {
	Name         string
	Spec         SnapshotSpec
	BlockAll     bool
	AllowDomains []string
	AllowCIDRs   []string
	Labels       map[string]string
	Volumes      []VolumeMount
}

// Problem is something a backend refuses (an error) or warns about in a configuration.
type Problem struct {
	// Attribute is the configuration attribute it is about, dotted for nested ones
	// ("api_key", "network.allow_domains"); "" for none.
	Attribute string
	Summary   string // Title Case, short
	Detail    string // what, which, what next
	Warning   bool
}

// SecretStore is a backend's own store of environment secrets (Daytona's), kept in step
// with the control plane by the provider: the backend's proxy substitutes the value, on
// requests to the secret's hosts only.
type SecretStore interface {
	// Name is the backend's name of the secret of variable envName of environment; a
	// sandbox's CreateRequest.Secrets refers to secrets by it.
	Name(environment, envName string) string
	// Get reads the secret: by ref.ID when set, else by name. nil means it does not exist.
	Get(ctx context.Context, ref RemoteSecret, environment, envName string) (*RemoteSecret, error)
	// Create creates the secret; one of that name left by an earlier attempt is adopted
	// and given this value and hosts.
	Create(ctx context.Context, s SecretValue) (RemoteSecret, error)
	// Update applies a hosts change, and a rotation when rotate is set; it recreates a
	// secret deleted outside trueforge.
	Update(ctx context.Context, ref RemoteSecret, s SecretValue, rotate bool) (RemoteSecret, error)
	// Delete deletes the secret; a missing one is fine.
	Delete(ctx context.Context, ref RemoteSecret, environment, envName string) error
}

// SecretValue is a secret as the control plane holds it.
type SecretValue struct {
	Environment string
	EnvName     string
	Value       string
	Hosts       []string
}

// RemoteSecret is what a backend reports of a secret it keeps: never its value.
type RemoteSecret struct {
	ID string `json:"id"`
	// Updated changes whenever the value or hosts change; a newer one than remembered is
	// the only sign that the value changed outside trueforge.
	Updated time.Time `json:"updated"`
	Hosts   []string  `json:"-"`
}

// APIError is implemented by errors that a backend's remote API returned (its refusal or
// failure of a request), so that callers can say what to check without knowing the
// backend.
type APIError interface {
	error
	// Backend names the backend whose API answered ("Daytona").
	Backend() string
}
