package provider

import (
	"strings"
	"testing"
)

// TestCheckRegistryURL: the url attribute refuses at plan what Daytona would answer with
// 400 "url must be a URL address", saying what it wants instead.
func TestCheckRegistryURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"registry:5000", "localhost:5000", "my_registry.example.com"} {
		if msg := checkRegistryURL(u); !strings.Contains(msg, "top-level domain") || !strings.Contains(msg, u) {
			t.Errorf("checkRegistryURL(%q) = %q; want a refusal naming it and the fix", u, msg)
		}
	}
	for _, u := range []string{"ghcr.io", "registry.example.com:5000", "10.0.0.5:5000", "https://index.docker.io/v1"} {
		if msg := checkRegistryURL(u); msg != "" {
			t.Errorf("checkRegistryURL(%q) = %q; want ok", u, msg)
		}
	}
}
