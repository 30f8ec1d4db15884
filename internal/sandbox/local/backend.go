package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Type is the sandbox provider type of this backend.
const Type = "local"

// Backend is the embedded backend (sandbox.Backend): bubblewrap sandboxes on overlay
// snapshots of this host's system directories, kept under the control plane's data
// directory: DataDir/local-backend (the snapshot builder's root) and
// DataDir/local-backend/runtime (sandboxes).
type Backend struct {
	// Probe, when set, replaces ProbeLimits (tests).
	Probe func(sandbox.Limits) []sandbox.UnenforcedLimit
	// VolumeProbe, when set, replaces volumeSizeUnenforced (tests): why a volume's size
	// would not be enforced, or "".
	VolumeProbe func(shared bool) string
	// SharedDir, when set, holds the snapshots instead of DataDir/local-backend: a
	// directory every machine of the control plane mounts at this path (SharedDirEnv).
	SharedDir string
	// Machine is the machine this backend runs on; zero means ThisMachine(). A test sets
	// another to stand for a second machine.
	Machine Machine

	mu       sync.Mutex
	builders map[string]*Builder // by root: a Builder sweeps and probes when it is made
}

var _ sandbox.Backend = (*Backend)(nil)

// NewBackend returns the local backend, keeping its snapshots in the shared directory
// named by SharedDirEnv when that is set.
func NewBackend() *Backend { return &Backend{SharedDir: os.Getenv(SharedDirEnv)} }

// Info describes the backend.
func (b *Backend) Info() sandbox.Info {
	return sandbox.Info{
		Type:         Type,
		Title:        "Local",
		Description:  "Embedded backend on this Linux machine: bubblewrap sandboxes on overlay snapshots of the host's system directories.",
		Capabilities: sandbox.Capabilities{HostLimits: true},
	}
}

// Root is the builder's root of a control plane whose data directory is dataDir.
func Root(dataDir string) string { return filepath.Join(dataDir, "local-backend") }

// RuntimeRoot is the sandboxes' root of such a control plane.
func RuntimeRoot(dataDir string) string { return filepath.Join(Root(dataDir), "runtime") }

// CheckCredentials accepts any provider: the embedded backend runs as the applying user
// and grants everything trueforge needs.
func (b *Backend) CheckCredentials(context.Context, sandbox.ProviderConfig) ([]string, []sandbox.Problem) {
	return append([]string(nil), sandbox.RequiredScopes...), nil
}

// CheckEnvironment refuses images other than the platform image, and says whether the
// environment's sandboxes get their limits on this host, for the user running the check:
// nothing when every limit can be enforced, a warning listing what cannot and why, or an
// error when the provider requires limits (RequireLimitsFor).
func (b *Backend) CheckEnvironment(_ context.Context, p sandbox.ProviderConfig, env sandbox.EnvironmentSpec) []sandbox.Problem {
	var problems []sandbox.Problem
	if img := env.Spec.Image; img != "" && img != sandbox.PlatformImage {
		problems = append(problems, sandbox.Problem{Attribute: "image", Summary: "Image Not Supported By Backend",
			Detail: fmt.Sprintf("The local backend builds on the platform image only; got %q. Set image = %q and install what you need in build_script.", img, sandbox.PlatformImage)})
	}
	problems = append(problems, buildInputProblems(env.Spec)...) // dockerfile.go
	probe := b.Probe
	if probe == nil {
		probe = ProbeLimits
	}
	s := env.Spec
	unenforced := probe(sandbox.LimitsOf(s))
	if len(unenforced) == 0 {
		return problems
	}
	var names, lines []string
	for _, u := range unenforced {
		names = append(names, u.Limit)
		lines = append(lines, "  - "+u.String())
	}
	what := fmt.Sprintf("The sandboxes of environment %q (%d CPU, %d GB memory, %d GB disk) cannot have their %s limit(s) enforced "+
		"on this host by the user running Terraform (uid %d):\n\n%s\n\n",
		env.Name, s.CPU, s.MemoryGB, s.DiskGB, strings.Join(names, ", "), os.Geteuid(), strings.Join(lines, "\n"))
	enforce := "run Terraform and trueforge-harness as root, or as a user with a delegated cgroup v2 subtree " +
		"(for example under `systemd-run --user --scope -p Delegate=yes`)"
	if RequireLimitsFor(p.RequireLimits) {
		why := "require_limits = true"
		if p.RequireLimits == nil {
			why = "require_limits is unset and Terraform runs as root, which requires them"
		}
		return append(problems, sandbox.Problem{Summary: "Sandbox Limits Cannot Be Enforced", Detail: what + fmt.Sprintf(
			"Sandbox provider %q requires limits (%s), so the harness would refuse every such sandbox. To enforce them, %s. "+
				"To run sandboxes with the limits that can be enforced instead, set require_limits = false on the sandbox provider.",
			p.Name, why, enforce)})
	}
	return append(problems, sandbox.Problem{Warning: true, Summary: "Sandbox Limits Not Enforced On This Host", Detail: what + fmt.Sprintf(
		"These sandboxes still start, with the limits that can be enforced (as under rootless container engines), and the harness "+
			"records what is not enforced on each sandbox's sandbox_provisioned event. To enforce every limit, %s. "+
			"To refuse such sandboxes instead, set require_limits = true on sandbox provider %q. "+
			"The harness checks again, for its own user, whenever it creates a sandbox.",
		enforce, p.Name)})
}

// Builder returns the snapshot builder of the control plane, one per root in this
// process.
func (b *Backend) Builder(_ context.Context, p sandbox.ProviderConfig) (sandbox.SnapshotBuilder, error) {
	return b.builder(p)
}

func (b *Backend) builder(p sandbox.ProviderConfig) (*Builder, error) {
	root, err := b.snapshotRoot(p.DataDir)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if bl, ok := b.builders[root]; ok {
		return bl, nil
	}
	bl, err := NewBuilder(root)
	if err != nil {
		return nil, err
	}
	bl.place = b.place(bl.root)
	if b.builders == nil {
		b.builders = map[string]*Builder{}
	}
	b.builders[root] = bl
	return bl, nil
}

// Runtime returns the sandbox runtime of the control plane, requiring limits as the
// provider's require_limits says.
func (b *Backend) Runtime(_ context.Context, p sandbox.ProviderConfig) (sandbox.Runtime, error) {
	bl, err := b.builder(p)
	if err != nil {
		return nil, err
	}
	rt, err := NewRuntime(bl, RuntimeRoot(p.DataDir))
	if err != nil {
		return nil, err
	}
	rt.Reconfigure(p)
	return rt, nil
}

// Reconfigure applies a provider's settings that a runtime takes after it is open: its
// require_limits, so that a long-lived runtime follows a setting applied since.
func (r *Runtime) Reconfigure(p sandbox.ProviderConfig) {
	r.SetRequireLimits(RequireLimitsFor(p.RequireLimits))
}

// Secrets: none; the harness's egress proxy puts secrets into requests.
func (b *Backend) Secrets(context.Context, sandbox.ProviderConfig) (sandbox.SecretStore, error) {
	return nil, nil
}
