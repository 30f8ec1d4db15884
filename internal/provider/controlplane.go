package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/trueforge/terraform-provider-trueforge/internal/builds"
	"github.com/trueforge/terraform-provider-trueforge/internal/catalog"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/local"
	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// controlPlane is what Configure hands to resources: the store, who is applying, and the
// backends, opened lazily because most plans never need them.
type controlPlane struct {
	store *store.Store
	owner string

	boxOnce sync.Once
	box     *secretbox.Box
	boxErr  error

	// builders caches one snapshot builder per provider type: a plan over hundreds of
	// environments refreshes each of them, and a builder is not free to set up.
	mu       sync.Mutex
	builders map[string]sandbox.SnapshotBuilder

	// daytonaOpts are added to every Daytona client (tests shorten polls and backoff).
	daytonaOpts []daytona.Option

	// limitsProbe, when set, replaces local.ProbeLimits (tests).
	limitsProbe func(sandbox.Limits) []sandbox.UnenforcedLimit
}

func newControlPlane(st *store.Store, owner string) *controlPlane {
	return &controlPlane{store: st, owner: owner}
}

// secretBox returns the key that seals secret values at rest.
func (cp *controlPlane) secretBox() (*secretbox.Box, error) {
	cp.boxOnce.Do(func() {
		cp.box, cp.boxErr = secretbox.Load(os.Getenv(secretbox.KeyEnv), filepath.Join(cp.store.Dir(), "secret.key"))
	})
	return cp.box, cp.boxErr
}

// builder returns the snapshot builder for a provider's type.
func (cp *controlPlane) builder(p store.SandboxProvider) (sandbox.SnapshotBuilder, error) {
	entry, ok := catalog.Lookup(p.Type)
	if !ok || !entry.Available {
		return nil, fmt.Errorf("sandbox provider type %q has no backend in this build", p.Type)
	}
	// A remote backend's builder is tied to its endpoint and key, which an update of the
	// provider may change within one run.
	cacheKey := p.Type
	if p.Type == typeDaytona {
		cacheKey = strings.Join([]string{p.Type, daytonaAPIURL(p), p.Target, string(p.APIKeyEnc)}, "\x00")
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if b, ok := cp.builders[cacheKey]; ok {
		return b, nil
	}
	var b sandbox.SnapshotBuilder
	var err error
	switch p.Type {
	case "local":
		b, err = local.NewBuilder(filepath.Join(cp.store.Dir(), "local-backend"))
	case typeDaytona:
		var c *daytona.Client
		if c, err = cp.daytonaClient(p); err == nil {
			b = daytona.NewBuilder(c)
		}
	default:
		err = fmt.Errorf("sandbox provider type %q has no backend in this build", p.Type)
	}
	if err != nil {
		return nil, err
	}
	if cp.builders == nil {
		cp.builders = map[string]sandbox.SnapshotBuilder{}
	}
	cp.builders[cacheKey] = b
	return b, nil
}

// coordinator returns the build coordinator for the named sandbox provider.
func (cp *controlPlane) coordinator(ctx context.Context, providerName string) (*builds.Coordinator, store.SandboxProvider, error) {
	p, err := cp.store.GetSandboxProvider(ctx, providerName)
	if err != nil {
		return nil, p, err
	}
	b, err := cp.builder(p)
	if err != nil {
		return nil, p, err
	}
	return &builds.Coordinator{Store: cp.store, Builder: b, Provider: p.Name}, p, nil
}

// configureControlPlane is the shared body of every resource's and data source's
// Configure.
func configureControlPlane(providerData any, diags *diag.Diagnostics) *controlPlane {
	if providerData == nil {
		return nil
	}
	cp, ok := providerData.(*controlPlane)
	if !ok {
		diags.AddError("Unexpected Configure Type",
			fmt.Sprintf("Expected *controlPlane, got %T. Please report this issue to the provider developers.", providerData))
		return nil
	}
	return cp
}

// notConfigured reports a resource used before the provider was configured.
func notConfigured(diags *diag.Diagnostics) {
	diags.AddError("Provider Not Configured",
		"The trueforge provider was not configured with known values, so the control-plane database is not open. "+
			"Make database_url and owner known at plan time.")
}
