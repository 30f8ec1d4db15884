package mcptools

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
)

// The transport alone keeps the token from another host, even under a client that
// follows every redirect (http.Client's default policy, not the Toolset's refusal): the
// second server of a cross-host redirect sees no Authorization, while a redirect within
// the named server still carries it.
func TestBearerAddsTheTokenOnlyForTheServersOrigin(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]string{} // server/path -> Authorization headers
	record := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[name+r.URL.Path] = append(seen[name+r.URL.Path], r.Header.Get("Authorization"))
			mu.Unlock()
		}
	}
	other := httptest.NewServer(record("other"))
	defer other.Close()
	named := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/stolen", http.StatusTemporaryRedirect)
		case "/move":
			http.Redirect(w, r, "/here", http.StatusTemporaryRedirect)
		default:
			record("named")(w, r)
		}
	}))
	defer named.Close()
	u, _ := url.Parse(named.URL)
	hc := &http.Client{Transport: bearer{base: http.DefaultTransport, origin: agents.OriginOf(u), env: "TOKEN", getenv: func(string) string { return "tok" }}}
	for _, path := range []string{"/away", "/move"} {
		resp, err := hc.Post(named.URL+path, "application/json", nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if got := seen["other/stolen"]; len(got) != 1 || got[0] != "" {
		t.Fatalf("the redirect target saw Authorization %q; want one request without it", got)
	}
	if got := seen["named/here"]; len(got) != 1 || got[0] != "Bearer tok" {
		t.Fatalf("the same-server redirect saw Authorization %q; want the token", got)
	}
}
