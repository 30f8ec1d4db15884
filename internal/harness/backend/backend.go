// Package backend opens the sandbox runtimes of the sandbox providers recorded in the
// store, through the backend registry (internal/backends), and keeps one per provider:
// a runtime holds in-memory state its sandboxes depend on (the local runtime's keeper
// lifelines), so it is opened once and kept for the process's life. A provider's key is
// opened with the control plane's secret key (internal/controlplane), as the Terraform
// provider sealed it, in memory only.
package backend

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Reconfigurable is a runtime that takes a provider's settings after it is open (the
// local runtime's require_limits); Runtimes applies them at every Runtime call, so a
// cached runtime follows a setting applied since.
type Reconfigurable interface {
	Reconfigure(p sandbox.ProviderConfig)
}

// Runtimes opens runtimes on demand and keeps one per provider name.
type Runtimes struct {
	Plane    *controlplane.Plane
	Backends backends.Registry

	mu    sync.Mutex
	cache map[string]sandbox.Runtime
}

// New returns the runtimes of the plane's providers, through the default backends.
func New(plane *controlplane.Plane) *Runtimes {
	return &Runtimes{Plane: plane, Backends: backends.Default()}
}

// Info describes the backend of a provider type.
func (r *Runtimes) Info(typ string) (sandbox.Info, error) {
	b, err := r.backend(typ)
	if err != nil {
		return sandbox.Info{}, err
	}
	return b.Info(), nil
}

func (r *Runtimes) backend(typ string) (sandbox.Backend, error) {
	b, err := r.Backends.Get(typ)
	if err != nil {
		return nil, fmt.Errorf("%w; this harness cannot run it", err)
	}
	return b, nil
}

// Runtime returns the runtime of provider p.
func (r *Runtimes) Runtime(ctx context.Context, p store.SandboxProvider) (sandbox.Runtime, error) {
	b, err := r.backend(p.Type)
	if err != nil {
		return nil, fmt.Errorf("sandbox provider %q: %w", p.Name, err)
	}
	cfg, err := r.Plane.Provider(ctx, p)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rt, ok := r.cache[p.Name]; ok {
		if rc, ok := rt.(Reconfigurable); ok {
			rc.Reconfigure(cfg)
		}
		return rt, nil
	}
	rt, err := b.Runtime(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening the %s backend of sandbox provider %q: %w", p.Type, p.Name, err)
	}
	if r.cache == nil {
		r.cache = map[string]sandbox.Runtime{}
	}
	r.cache[p.Name] = rt
	return rt, nil
}

// Secrets returns the backend secret store of provider p, or nil when its backend keeps
// none.
func (r *Runtimes) Secrets(ctx context.Context, p store.SandboxProvider) (sandbox.SecretStore, error) {
	b, err := r.backend(p.Type)
	if err != nil {
		return nil, err
	}
	cfg, err := r.Plane.Provider(ctx, p)
	if err != nil {
		return nil, err
	}
	return b.Secrets(ctx, cfg)
}

// Types lists the provider types this harness runs.
func (r *Runtimes) Types() string { return strings.Join(r.Backends.Types(), ", ") }
