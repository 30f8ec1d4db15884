package validatorjs

import "testing"

// TestIsURL: every expectation is what validator.js 13.15.15 isURL answers with its
// defaults (run under node), so the port cannot drift from the library Daytona uses.
func TestIsURL(t *testing.T) {
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
		if got := IsURL(u); got != want {
			t.Errorf("IsURL(%q) = %v; want %v", u, got, want)
		}
	}
}
