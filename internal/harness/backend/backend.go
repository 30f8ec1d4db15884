// Package backend opens the sandbox.Runtime of a sandbox provider recorded in the store,
// chosen by the provider's type. Each type is one Opener in a Registry: "local" (the
// embedded bubblewrap runtime) and "daytona" (fromstore.Runtime: the provider's sealed API
// key, its api_url and target, and the daytona package's defaults).
//
// The local backend keeps its data beside the database, as the provider does:
// <store dir>/local-backend (the snapshot builder's root, see
// internal/provider/controlplane.go) and <store dir>/local-backend/runtime (sandboxes).
package backend

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/fromstore"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/local"
	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Opener returns the runtime of one provider.
type Opener func(ctx context.Context, st *store.Store, p store.SandboxProvider) (sandbox.Runtime, error)

// Registry maps provider types to Openers.
type Registry map[string]Opener

// Default is every backend of this build.
func Default() Registry {
	return Registry{"local": OpenLocal, "daytona": fromstore.Runtime}
}

// LocalRoot is the local builder's root for a store.
func LocalRoot(st *store.Store) string { return filepath.Join(st.Dir(), "local-backend") }

// OpenLocal opens the embedded bubblewrap runtime on the builder the provider used,
// requiring limits as the provider's require_limits says (see configure).
func OpenLocal(_ context.Context, st *store.Store, p store.SandboxProvider) (sandbox.Runtime, error) {
	b, err := local.NewBuilder(LocalRoot(st))
	if err != nil {
		return nil, err
	}
	rt, err := local.NewRuntime(b, filepath.Join(b.Root(), "runtime"))
	if err != nil {
		return nil, err
	}
	configure(rt, p)
	return rt, nil
}

// configure applies the provider's settings that a runtime takes after it is open:
// the local backend's require_limits (unset: required when this process runs as root).
// A runtime without limits of its own to refuse (Daytona) takes none. It runs at every
// Runtimes.Runtime, so a cached runtime follows a setting applied since.
func configure(rt sandbox.Runtime, p store.SandboxProvider) {
	if r, ok := rt.(interface{ SetRequireLimits(bool) }); ok {
		r.SetRequireLimits(local.RequireLimitsFor(p.RequireLimits))
	}
}

// Runtimes opens runtimes on demand and keeps one per provider name.
type Runtimes struct {
	Store    *store.Store
	Registry Registry

	mu    sync.Mutex
	cache map[string]sandbox.Runtime
}

// Runtime returns the runtime of provider p.
func (r *Runtimes) Runtime(ctx context.Context, p store.SandboxProvider) (sandbox.Runtime, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rt, ok := r.cache[p.Name]; ok {
		configure(rt, p)
		return rt, nil
	}
	open, ok := r.Registry[p.Type]
	if !ok {
		var types []string
		for t := range r.Registry {
			types = append(types, t)
		}
		sort.Strings(types)
		return nil, fmt.Errorf("sandbox provider %q has type %q, which this harness cannot run (it runs: %s)", p.Name, p.Type, strings.Join(types, ", "))
	}
	rt, err := open(ctx, r.Store, p)
	if err != nil {
		return nil, fmt.Errorf("opening the %s backend of sandbox provider %q: %w", p.Type, p.Name, err)
	}
	if r.cache == nil {
		r.cache = map[string]sandbox.Runtime{}
	}
	r.cache[p.Name] = rt
	return rt, nil
}

// ProviderKey opens a sandbox provider's sealed API key (for backends that need one,
// such as daytona) with the control plane's secret box: TRUEFORGE_SECRET_KEY, else the
// key file beside the database, as the provider sealed it. The key is used in memory
// only and never reaches a sandbox or a log. (The daytona entry of Default opens it
// through fromstore, which seals and opens the same way.)
func ProviderKey(st *store.Store, p store.SandboxProvider) ([]byte, error) {
	if len(p.APIKeyEnc) == 0 {
		return nil, fmt.Errorf("sandbox provider %q has no API key; set api_key (or api_key_wo) and apply", p.Name)
	}
	box, err := secretbox.Load(os.Getenv(secretbox.KeyEnv), filepath.Join(st.Dir(), "secret.key"))
	if err != nil {
		return nil, fmt.Errorf("opening the secret box to read the API key of sandbox provider %q: %w", p.Name, err)
	}
	key, err := box.Open(p.APIKeyEnc, "sandbox_provider/"+p.Name)
	if err != nil {
		return nil, fmt.Errorf("the API key of sandbox provider %q cannot be opened with this control plane's secret key (TRUEFORGE_SECRET_KEY or %s): %w",
			p.Name, filepath.Join(st.Dir(), "secret.key"), err)
	}
	return key, nil
}
