package agents

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model/anthropic"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model/openaicompat"
)

// HarnessEnvPrefix starts the names of the harness's own settings and keys
// (TRUEFORGE_SECRET_KEY decrypts every stored secret, TRUEFORGE_DATABASE_URL reaches the
// control plane). An agent spec is written by the agent's author, not by whoever runs
// the agent, so a spec may never name one of these as a credential to send.
const HarnessEnvPrefix = "TRUEFORGE_"

// CredentialEnvsVar, when set in the harness's environment, lists (comma-separated) the
// only variables agents may name as credentials. Unset, any variable but the harness's
// own may be named: the agent's author then chooses which of the harness's variables
// is sent to the server the agent names, so an operator who runs agents written by
// others sets this list.
const CredentialEnvsVar = "TRUEFORGE_CREDENTIAL_ENVS"

// CheckCredential says whether the harness may send the value of its environment
// variable env, which the spec field envField names, to rawURL, which the spec field
// urlField gives. Fields are spec paths such as "mcp_servers[0].credential_env".
//
// The rule (model and MCP credentials come from the harness's environment and reach
// only their service): env is not one of the harness's own variables, and the URL is
// https, or plain http to a loopback host. Only the URL's text is looked at, never DNS,
// so a refusal comes before anything is resolved, dialled or sent. An empty rawURL is
// accepted: the caller then uses its SDK's built-in https endpoint.
func CheckCredential(envField, env, urlField, rawURL string) error {
	if len(env) >= len(HarnessEnvPrefix) && strings.EqualFold(env[:len(HarnessEnvPrefix)], HarnessEnvPrefix) {
		// EqualFold: on Windows variable names are case-insensitive, so
		// trueforge_secret_key would read the same key.
		return fmt.Errorf("%s %q: variables named %s* are the harness's own settings and are never sent to a model or MCP server; export the credential under another name and set %s to it",
			envField, env, HarnessEnvPrefix, lastField(envField))
	}
	if allowed := os.Getenv(CredentialEnvsVar); allowed != "" {
		names := strings.FieldsFunc(allowed, func(r rune) bool { return r == ',' || r == ' ' })
		if !slices.Contains(names, env) {
			return fmt.Errorf("%s %q: this harness lets agents use only the credential variables in %s (%s); ask its operator to add %s, or set %s to one of those",
				envField, env, CredentialEnvsVar, strings.Join(names, ", "), env, lastField(envField))
		}
	}
	if rawURL == "" {
		return nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("%s %q is not a URL: %w", urlField, rawURL, err)
	}
	if u.Host == "" {
		return fmt.Errorf("%s %q has no host; give an absolute https:// URL", urlField, rawURL)
	}
	switch {
	case strings.EqualFold(u.Scheme, "https"):
		return nil
	case strings.EqualFold(u.Scheme, "http") && IsLoopbackHost(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%s %q: the credential in %s %s would be sent in clear text to a host that is not this machine; use an https:// URL (plain http:// is allowed only for localhost, 127.0.0.0/8 and ::1)",
		urlField, rawURL, envField, env)
}

// IsLoopbackHost reports whether host (a URL's Hostname: no port, no brackets) is
// "localhost" or a loopback IP address. It never resolves a name: a name that resolves
// to loopback today may not tomorrow, and resolving would reach the network before the
// check has refused anything.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckCredential checks the model's key variable and base URL with the package
// CheckCredential. A scripted model sends nothing, so it is never refused.
func (m ModelSpec) CheckCredential() error {
	env := m.APIKeyEnv
	switch m.Provider {
	case agentspec.ModelOpenAI:
		if env == "" {
			env = openaicompat.DefaultKeyEnv
		}
	case agentspec.ModelAnthropic:
		if env == "" {
			env = anthropic.DefaultKeyEnv
		}
	default:
		return nil
	}
	return CheckCredential("model.api_key_env", env, "model.base_url", m.BaseURL)
}

// CheckCredential checks an MCP server's credential variable and URL; i is the
// server's index in the spec's mcp_servers. A server without credential_env is sent
// no credential, so any URL is accepted.
func (s MCPServer) CheckCredential(i int) error {
	if s.CredentialEnv == "" {
		return nil
	}
	p := fmt.Sprintf("mcp_servers[%d].", i)
	return CheckCredential(p+"credential_env", s.CredentialEnv, p+"url", s.URL)
}

// lastField is the last element of a spec path: "credential_env" of
// "mcp_servers[0].credential_env".
func lastField(path string) string {
	return path[strings.LastIndex(path, ".")+1:]
}

// Origin is what must match for a request to go to the server an agent named: a URL's
// scheme and host:port, lower-cased, with the scheme's default port made explicit
// (https://h and https://h:443 are one server; http://h and https://h are not).
type Origin struct{ Scheme, HostPort string }

// OriginOf is u's Origin.
func OriginOf(u *url.URL) Origin {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return Origin{scheme, net.JoinHostPort(strings.ToLower(u.Hostname()), port)}
}

func (o Origin) String() string { return o.Scheme + "://" + o.HostPort }

// SameOriginRedirects is an http.Client CheckRedirect that refuses a redirect away from
// the first request's origin, then applies next (nil: http.Client's default of at most
// 10 redirects). server names the server in the error ("MCP server \"docs\"", "the
// model API") and fix says what to set instead. Go's client keeps credential headers on
// redirects to subdomains and within a host, and a transport that adds them would add
// them anywhere; refusing the redirect keeps both the credential and the request body
// with the server the agent named.
func SameOriginRedirects(server, fix string, next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if want, got := OriginOf(via[0].URL), OriginOf(req.URL); got != want {
			return fmt.Errorf("%s redirected from %s to %s; the harness follows redirects only within the server's own scheme and host:port, so no request or credential goes to a host the agent did not name (%s)",
				server, want, got, fix)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}

// sameHostRedirects returns a copy of c (nil: a default client) that refuses a model
// API's redirect to another origin: a model API has no reason to send the key elsewhere.
func sameHostRedirects(c *http.Client) *http.Client {
	out := &http.Client{}
	if c != nil {
		cp := *c
		out = &cp
	}
	out.CheckRedirect = SameOriginRedirects("the model API", "set model.base_url to the address that answers", out.CheckRedirect)
	return out
}
