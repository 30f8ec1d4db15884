package local

import (
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// TestCheckRegistryRefusesEveryRegistry: the local backend runs only the platform image,
// so any registry is refused, on sandbox_provider, saying what to use instead.
func TestCheckRegistryRefusesEveryRegistry(t *testing.T) {
	t.Parallel()
	pr := NewBackend().CheckRegistry(sandbox.ProviderConfig{Name: "dev"}, sandbox.RegistrySpec{URL: "ghcr.io"})
	if len(pr) != 1 || pr[0].Attribute != "sandbox_provider" || pr[0].Warning || pr[0].Summary != "Registries Not Supported By Backend" ||
		!strings.Contains(pr[0].Detail, `"dev"`) || !strings.Contains(pr[0].Detail, "need a daytona provider") {
		t.Fatalf("CheckRegistry = %+v; want one refusal of the registry", pr)
	}
}
