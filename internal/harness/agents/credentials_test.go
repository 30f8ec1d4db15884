package agents_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
)

// operator is the single-user default: the harness's own agent, no credentials file.
var operator = agents.Authority{Agent: "x", Owner: "me", Operator: "me"}

func checkCredential(envField, env, urlField, rawURL string) error {
	_, err := operator.Authorize(agents.CredentialUse{Field: envField, Env: env, URLField: urlField, URL: rawURL})
	return err
}

// The single-user default keeps the rules of before credentials files: no TRUEFORGE_*
// variable, and https or loopback http only.
func TestCheckCredential(t *testing.T) {
	for _, c := range []struct {
		env, url string
		want     string // "" means accepted
	}{
		{"OPENAI_API_KEY", "https://api.example.com/v1", ""},
		{"TF_KEY", "HTTPS://api.example.com", ""},
		{"TF_KEY", "http://127.0.0.1:8080/v1", ""},
		{"TF_KEY", "http://127.1.2.3/", ""},
		{"TF_KEY", "http://[::1]:11434/v1", ""},
		{"TF_KEY", "http://localhost:11434/v1", ""},
		{"TF_KEY", "http://LocalHost/", ""},
		{"TRUEFORGE_SECRET_KEY", "https://api.example.com", `x.key_env "TRUEFORGE_SECRET_KEY": variables named TRUEFORGE_* are the harness's own settings and are never sent to a model or MCP server; export the credential under another name and set key_env to it`},
		{"TRUEFORGE_DATABASE_URL", "http://127.0.0.1/", "variables named TRUEFORGE_*"},
		{"Trueforge_Secret_Key", "", "variables named TRUEFORGE_*"},
		{"TF_KEY", "http://example.invalid/v1", `x.url "http://example.invalid/v1": the credential in x.key_env TF_KEY would be sent in clear text to a host that is not this machine; use an https:// URL`},
		{"TF_KEY", "http://10.0.0.7:11434/v1", "use an https:// URL"},
		{"TF_KEY", "http://127.0.0.1.attacker.example/", "use an https:// URL"},
		{"TF_KEY", "http://localhost.attacker.example/", "use an https:// URL"},
		{"TF_KEY", "ws://127.0.0.1/", "use an https:// URL"},
		{"TF_KEY", "api.example.com/v1", "has no host"},
		{"TF_KEY", "http://bad host/", "is not a URL"},
	} {
		err := checkCredential("x.key_env", c.env, "x.url", c.url)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s to %s: %v; want it accepted", c.env, c.url, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s to %s: %v; want %q", c.env, c.url, err, c.want)
		}
	}
}

// keyServer is a model API on loopback that records the key of each request and
// answers 400 (which the SDKs do not retry).
type keyServer struct {
	mu   sync.Mutex
	keys []string
}

func (k *keyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	k.keys = append(k.keys, r.Header.Get("Authorization")+r.Header.Get("X-Api-Key")) // whichever the SDK uses
	k.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	fmt.Fprint(w, `{"type":"error","error":{"type":"invalid_request_error","message":"test server"}}`)
}

// newKeyServer is a keyServer on loopback, closed when the test ends.
func newKeyServer(t *testing.T) (*keyServer, *httptest.Server) {
	k := &keyServer{}
	srv := httptest.NewServer(k)
	t.Cleanup(srv.Close)
	return k, srv
}

// forProviders runs test in a subtest for each model provider, named for it.
func forProviders(t *testing.T, test func(t *testing.T, provider string)) {
	for _, provider := range []string{"openai", "anthropic"} {
		t.Run(provider, func(t *testing.T) { test(t, provider) })
	}
}

// keyAgent is agent x on provider's model m at baseURL, with its key in keyEnv.
func keyAgent(provider, baseURL, keyEnv string) *agents.Agent {
	return &agents.Agent{Name: "x", Spec: agents.Spec{Model: agents.ModelSpec{Provider: provider, Name: "m", BaseURL: baseURL, APIKeyEnv: keyEnv}}}
}

func (k *keyServer) seen() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.keys...)
}

func getenv(name string) string {
	switch name {
	case "TRUEFORGE_SECRET_KEY":
		return "harness-secret-CANARY-91ad"
	case "TF_TEST_MODEL_KEY":
		return "sk-CANARY-3c5e"
	}
	return ""
}

// generate builds the agent's model and runs one call; the error is NewModel's, else
// Generate's.
func generate(a *agents.Agent, hc *http.Client) (built bool, err error) {
	m, err := a.NewModel(agents.ModelOptions{HTTPClient: hc, Getenv: getenv, Credentials: agents.Authority{Agent: a.Name, Owner: "me", Operator: "me"}})
	if err != nil {
		return false, err
	}
	_, err = m.Generate(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, nil)
	return true, err
}

// F2, the attack: the agent's author names the harness's own secret key as the model
// key and points base_url at a server of theirs. NewModel refuses, naming the field,
// the variable and the fix, and the server sees no request.
func TestModelKeyCannotBeAHarnessVariable(t *testing.T) {
	forProviders(t, func(t *testing.T, provider string) {
		attacker, srv := newKeyServer(t)
		a := keyAgent(provider, srv.URL, "TRUEFORGE_SECRET_KEY")
		built, err := generate(a, srv.Client())
		want := `model.api_key_env "TRUEFORGE_SECRET_KEY": variables named TRUEFORGE_* are the harness's own settings and are never sent to a model or MCP server; export the credential under another name and set api_key_env to it`
		if built || err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewModel built %v, error %v; want it refused with %q", built, err, want)
		}
		if got := attacker.seen(); len(got) != 0 {
			t.Fatalf("the server saw %d requests with keys %q; want none", len(got), got)
		}
	})
}

// wire stands in for the network: it counts what would have been sent.
type wire struct {
	mu sync.Mutex
	n  int
}

func (c *wire) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return nil, fmt.Errorf("wire: %s %s was sent", req.Method, req.URL)
}

// A model key is not sent over plain http to a host other than this machine: NewModel
// refuses before anything is resolved or dialled (the error is the harness's, not a
// DNS failure for the .invalid name).
func TestModelKeyIsNotSentOverPlainHTTPBeyondLoopback(t *testing.T) {
	forProviders(t, func(t *testing.T, provider string) {
		var w wire
		a := keyAgent(provider, "http://example.invalid/v1", "TF_TEST_MODEL_KEY")
		built, err := generate(a, &http.Client{Transport: &w})
		want := `model.base_url "http://example.invalid/v1": the credential in model.api_key_env TF_TEST_MODEL_KEY would be sent in clear text`
		if built || err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "use an https:// URL") {
			t.Errorf("NewModel built %v, error %v; want it refused with %q and the https fix", built, err, want)
		}
		if w.n != 0 {
			t.Fatalf("%d requests were sent; want none", w.n)
		}
	})
}

// Plain http to loopback (local model servers, the tests' httptest servers) still
// carries the key.
func TestModelKeyReachesLoopbackHTTP(t *testing.T) {
	forProviders(t, func(t *testing.T, provider string) {
		ks, srv := newKeyServer(t)
		a := keyAgent(provider, srv.URL, "TF_TEST_MODEL_KEY")
		if built, err := generate(a, srv.Client()); !built || err == nil || !strings.Contains(err.Error(), "400") {
			t.Fatalf("built %v, error %v; want the test server's 400", built, err)
		}
		// Both SDKs send the key as a bearer token.
		if got, want := ks.seen(), "Bearer sk-CANARY-3c5e"; len(got) != 1 || got[0] != want {
			t.Fatalf("the server saw keys %q; want one request with %q", got, want)
		}
	})
}

// With TRUEFORGE_CREDENTIAL_ENVS set, the operator's list decides which variables an
// agent may have sent; any other is refused before a request is made.
func TestCredentialEnvsListLimitsWhatAgentsMayName(t *testing.T) {
	t.Setenv(agents.CredentialEnvsVar, "MODEL_KEY, GITHUB_MCP_TOKEN")
	if err := checkCredential("model.api_key_env", "MODEL_KEY", "model.base_url", "https://api.example.com/v1"); err != nil {
		t.Fatalf("a listed variable was refused: %v", err)
	}
	err := checkCredential("mcp_servers[0].credential_env", "AWS_SECRET_ACCESS_KEY", "mcp_servers[0].url", "https://mcp.example.com")
	if err == nil || !strings.Contains(err.Error(), "mcp_servers[0].credential_env \"AWS_SECRET_ACCESS_KEY\"") ||
		!strings.Contains(err.Error(), "MODEL_KEY, GITHUB_MCP_TOKEN") {
		t.Fatalf("an unlisted variable: %v", err)
	}
	t.Setenv(agents.CredentialEnvsVar, "")
	if err := checkCredential("mcp_servers[0].credential_env", "AWS_SECRET_ACCESS_KEY", "mcp_servers[0].url", "https://mcp.example.com"); err != nil {
		t.Fatalf("without a list, any non-harness variable may be named: %v", err)
	}
}

// A model API that redirects to another host does not get the key carried there: the
// redirect is refused and the other host sees no request.
func TestModelKeyDoesNotFollowARedirectToAnotherHost(t *testing.T) {
	forProviders(t, func(t *testing.T, provider string) {
		elsewhere, other := newKeyServer(t)
		redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
		}))
		defer redirect.Close()
		a := keyAgent(provider, redirect.URL, "TF_TEST_MODEL_KEY")
		built, err := generate(a, redirect.Client())
		if !built || err == nil || !strings.Contains(err.Error(), "the model API redirected from") || !strings.Contains(err.Error(), "follows redirects only within the server's own scheme and host:port") {
			t.Fatalf("built %v, error %v; want the redirect refused", built, err)
		}
		if got := elsewhere.seen(); len(got) != 0 {
			t.Fatalf("the redirect target received %q", got)
		}
	})
}

// Origins compare scheme and host:port with default ports filled in, so neither a
// spelling of the same server is refused nor a downgrade or another port let through.
func TestOriginOf(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"https://Example.com/mcp", "https://example.com:443/other", true},
		{"http://127.0.0.1/x", "http://127.0.0.1:80/y", true},
		{"http://[::1]:8080/", "http://[::1]:8080/z", true},
		{"https://example.com/", "http://example.com/", false},
		{"https://example.com/", "https://example.com:8443/", false},
		{"https://example.com/", "https://evil.example.com/", false},
		{"http://127.0.0.1:1/", "http://127.0.0.1:2/", false},
	} {
		ua, _ := url.Parse(c.a)
		ub, _ := url.Parse(c.b)
		if got := agents.OriginOf(ua) == agents.OriginOf(ub); got != c.same {
			t.Errorf("%s vs %s: same origin %v; want %v", c.a, c.b, got, c.same)
		}
	}
}
