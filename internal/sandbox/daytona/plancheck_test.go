package daytona_test

import (
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// TestCheckRegistryURL: a registry's url is refused, on the url attribute, when Daytona
// would answer it with 400 "url must be a URL address", saying what it wants instead.
func TestCheckRegistryURL(t *testing.T) {
	t.Parallel()
	b := daytona.NewBackend()
	for _, u := range []string{"registry:5000", "localhost:5000", "my_registry.example.com"} {
		pr := b.CheckRegistry(sandbox.ProviderConfig{}, sandbox.RegistrySpec{URL: u})
		if len(pr) != 1 || pr[0].Attribute != "url" || pr[0].Warning || !strings.Contains(pr[0].Detail, "top-level domain") || !strings.Contains(pr[0].Detail, u) {
			t.Errorf("CheckRegistry(%q) = %+v; want a refusal naming it and the fix", u, pr)
		}
	}
	for _, u := range []string{"ghcr.io", "registry.example.com:5000", "10.0.0.5:5000", "https://index.docker.io/v1"} {
		if pr := b.CheckRegistry(sandbox.ProviderConfig{}, sandbox.RegistrySpec{URL: u}); len(pr) != 0 {
			t.Errorf("CheckRegistry(%q) = %+v; want ok", u, pr)
		}
	}
}

// TestRegistryURL: Docker Hub's URLs are kept as docker.io, others without a trailing '/'.
func TestRegistryURL(t *testing.T) {
	t.Parallel()
	b := daytona.NewBackend()
	for in, want := range map[string]string{"": "docker.io", "https://index.docker.io/v1/": "docker.io", "ghcr.io/": "ghcr.io", " registry.example.com:5000 ": "registry.example.com:5000"} {
		if got := b.RegistryURL(in); got != want {
			t.Errorf("RegistryURL(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestCheckRegistryImage: Daytona pulls with the registry whose URL matches the image's
// host, so an image of another host is refused on the image attribute.
func TestCheckRegistryImage(t *testing.T) {
	t.Parallel()
	b := daytona.NewBackend()
	for _, tc := range []struct {
		url, image string
		refused    bool
	}{
		{"https://ghcr.io", "ghcr.io/acme/agent:1", false},
		{"https://ghcr.io", "python:3.12", true},
		{"docker.io", "python:3.12", false},
		{"registry.example.com:5000/team", "registry.example.com:5000/team/app", false},
		{"ghcr.io", "", false},
		{"ghcr.io", sandbox.PlatformImage, false},
	} {
		pr := b.CheckRegistryImage("ghcr", tc.url, tc.image)
		if tc.refused != (len(pr) == 1 && pr[0].Attribute == "image" && pr[0].Summary == "Image Not From Registry") || (!tc.refused && len(pr) != 0) {
			t.Errorf("CheckRegistryImage(%q, %q) = %+v; want refused=%v", tc.url, tc.image, pr, tc.refused)
		}
	}
}
