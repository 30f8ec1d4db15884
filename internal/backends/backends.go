// Package backends is the set of sandbox backends this build has, by sandbox provider
// type: the one place outside the backend packages that imports them. The provider
// (resources, the type's catalog), the harness (runtimes) and the binaries (the local
// backend's embedded programs) reach backends only through it.
package backends

import (
	"fmt"
	"sort"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// Registry maps sandbox provider types to backends.
type Registry map[string]sandbox.Backend

// Default is every backend of this build, with its defaults.
func Default() Registry {
	r := Registry{daytona.Type: daytona.NewBackend()}
	addPlatformBackends(r)
	return r
}

// Types lists the registry's types, sorted: the catalog a sandbox provider's type is
// chosen from.
func (r Registry) Types() []string {
	out := make([]string, 0, len(r))
	for t := range r {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Get returns the backend of a sandbox provider type.
func (r Registry) Get(typ string) (sandbox.Backend, error) {
	if b, ok := r[typ]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("sandbox provider type %q has no backend in this build (it has: %s)", typ, strings.Join(r.Types(), ", "))
}
