package provider

import (
	"strings"
	"testing"
)

// TestDaytonaRegistryURL: the registry url rule is Daytona's @IsUrl() (validator.js 13.15
// isURL with its defaults); every expectation here is what that isURL answers.
func TestDaytonaRegistryURL(t *testing.T) {
	t.Parallel()
	for u, want := range map[string]bool{
		"registry:5000": false, "localhost:5000": false, "http://ghcr": false, "": false,
		"my_reg.com": false, "a.b1": false, "*.foo.com": false, ":@ghcr.io": false, "@ghcr.io": false,
		"-a.com": false, "a-.com": false, "a..b.com": false, "1.2.3.256": false, "a.com:0": false,
		"a.com:65536": false, "ex.ab:80:90": false, "//ex.ab": false, "gopher://ex.ab": false, "ex.ａｂ": false,
		"ghcr.io": true, "docker.io": true, "registry.example.com:5000": true, "registry.local:5000": true,
		"10.0.0.1:5000": true, "[::1]:5000": true, "[fe80::1%eth0]": true, "https://index.docker.io/v1": true,
		"ftp://a.bc": true, "ghcr.io/acme": true, "ghcr.io:": true, "u:p@ghcr.io": true, "user@ghcr.io": true,
		"xn--p1ai.xn--p1ai": true, "ex.рф": true, "Registry.EXAMPLE.com": true, "ex.ab#frag": true, "ex.ab?x=1": true,
	} {
		if got := daytonaRegistryURL(u); got != want {
			t.Errorf("daytonaRegistryURL(%q) = %v; want %v", u, got, want)
		}
	}
}

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
