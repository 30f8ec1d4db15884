package local

import (
	"fmt"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

var _ sandbox.RegistryChecker = (*Backend)(nil)

// CheckRegistry refuses every registry (ErrRegistries): the local backend runs only the
// platform image, so it pulls from none.
func (b *Backend) CheckRegistry(p sandbox.ProviderConfig, _ sandbox.RegistrySpec) []sandbox.Problem {
	return []sandbox.Problem{{Attribute: "sandbox_provider", Summary: "Registries Not Supported By Backend",
		Detail: fmt.Sprintf("Sandbox provider %q cannot pull from a registry: %s. Use a daytona sandbox provider for private images, or install what you need in build_script.",
			p.Name, strings.TrimSuffix(ErrRegistries.Error(), ": "+sandbox.ErrUnsupported.Error()))}}
}

// RegistryURL is url: the local backend keeps no registry to change it.
func (b *Backend) RegistryURL(url string) string { return url }

// CheckRegistryImage finds nothing: CheckRegistry already refuses the registry.
func (b *Backend) CheckRegistryImage(_, _, _ string) []sandbox.Problem { return nil }
