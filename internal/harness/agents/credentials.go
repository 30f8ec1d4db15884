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

// HarnessEnvPrefix starts the names of the harness's own settings and keys, which no
// spec may name as a credential (agentspec.HarnessEnvPrefix, the one rule shared with
// the provider's plan).
const HarnessEnvPrefix = agentspec.HarnessEnvPrefix

// CredentialEnvsVar, when set in the harness's environment, narrows the single-user
// default (no credentials file, SQLite, the operator's own agents): only the variables
// it lists (comma-separated) may then be named. It is subordinate to the credentials
// file: with --credentials the file alone decides, and setting both is refused
// (CheckCredentialEnvsVar) rather than one silently ignored.
const CredentialEnvsVar = "TRUEFORGE_CREDENTIAL_ENVS"

// CheckCredentialEnvsVar refuses TRUEFORGE_CREDENTIAL_ENVS beside a credentials file.
func CheckCredentialEnvsVar(c *Credentials) error {
	if c != nil && os.Getenv(CredentialEnvsVar) != "" {
		return fmt.Errorf("%s is set, but the credentials file %s decides which credentials exist and where each may go; unset %s (declare each variable it listed as a credential of the file)",
			CredentialEnvsVar, c.Path(), CredentialEnvsVar)
	}
	return nil
}

// Default endpoints of the model APIs, where the SDKs send the key when the agent gives
// no base_url: a credential for them is bound to these origins.
const (
	OpenAIBaseURL    = "https://api.openai.com/v1"
	AnthropicBaseURL = "https://api.anthropic.com"
)

// Authority decides, for one agent, which credential may be sent where. A credential is
// the harness operator's: with a credentials file (File) it is sent only to an origin
// it is bound to, for an agent whose owner it allows. Without one, the single-user
// default: on SQLite (Operator set) the operator's own agents may name the harness's
// variables (a credential name is then the variable of the same name), to https or
// loopback URLs, as before credentials files existed; on PostgreSQL (Operator ""), or
// for an agent of anyone else, nothing is sent. The zero Authority sends nothing.
type Authority struct {
	File     *Credentials // the operator's credentials file; nil: none
	Agent    string       // the agent's name, for messages
	Owner    string       // the agent's owner (the agents table's owner column)
	Operator string       // the owner the single-user default serves; "" on PostgreSQL
}

// Authority is the Authority of a's credentials, from the operator's file (nil: none)
// and, for the single-user default, the harness's own owner ("" on PostgreSQL).
func (a *Agent) Authority(file *Credentials, operator string) Authority {
	return Authority{File: file, Agent: a.Name, Owner: a.Owner, Operator: operator}
}

// CredentialUse is one place a spec asks for a credential to be sent.
type CredentialUse struct {
	// Field is the spec field naming it ("mcp_servers[0].credential"); Name is the
	// credential it names, or Env the variable (the older *_env fields).
	Field, Name, Env string
	// URLField and URL are where it would go (the model's default endpoint when the
	// agent gives none).
	URLField, URL string
}

// Grant is a credential the Authority lets go to one origin: the variable to read at
// each request (so a rotated value is picked up at once).
type Grant struct {
	Name   string // the credential's name ("" for the older form without a file)
	Env    string
	Origin Origin
}

// Authorize decides u: a Grant, or an error naming the credential, the field and the
// fix. Only the spec's text and the file are looked at, never DNS, so a refusal comes
// before anything is resolved, dialled or sent.
func (a Authority) Authorize(u CredentialUse) (Grant, error) {
	named := u.Name
	if named == "" {
		named = u.Env
	}
	if u.Name != "" {
		if err := agentspec.CheckCredentialName(u.Name); err != nil {
			return Grant{}, fmt.Errorf("%s %q: %w; set %s to a credential the harness operator declared", u.Field, u.Name, err, lastField(u.Field))
		}
	} else if err := agentspec.CheckCredentialEnv(u.Env); err != nil {
		return Grant{}, fmt.Errorf("%s %q: %w and set %s to it", u.Field, u.Env, err, lastField(u.Field))
	}
	origin, err := originOf(u)
	if err != nil {
		return Grant{}, err
	}
	const nothing = "nothing was sent"
	if a.File == nil {
		switch {
		case a.Operator == "":
			return Grant{}, fmt.Errorf("%s = %q: this harness has no credentials file (--credentials), and on a shared (PostgreSQL) control plane it sends no credential without one; %s. "+
				"Ask the harness operator to declare the credential, bound to %s, for owner %q in a --credentials file, and name it in %s",
				u.Field, named, nothing, origin, a.Owner, credentialField(u.Field))
		case a.Owner != a.Operator:
			return Grant{}, fmt.Errorf("%s = %q: agent %q is owned by %q, not by this harness's operator %q, and without a credentials file (--credentials) the harness sends its own variables only for its operator's agents; %s. "+
				"Ask the harness operator to declare the credential, bound to %s, for owner %q in a --credentials file",
				u.Field, named, a.Agent, a.Owner, a.Operator, nothing, origin, a.Owner)
		}
		return a.operatorDefault(u, named, origin)
	}
	if u.Name == "" {
		// The older form names a variable: it may go where some credential of the
		// file holding that variable may go, for this owner.
		for _, c := range a.File.list {
			if c.Env == u.Env && c.allows(a.Owner) && c.boundTo(origin) {
				return Grant{Name: c.Name, Env: c.Env, Origin: origin}, nil
			}
		}
		return Grant{}, fmt.Errorf("%s = %q names a harness variable, but this harness's credentials file %s declares no credential holding %s that agents of %q may send to %s; %s. "+
			"Set %s to a credential the file declares for you instead, or ask the harness operator to declare one",
			u.Field, u.Env, a.File.Path(), u.Env, a.Owner, origin, nothing, credentialField(u.Field))
	}
	c, ok := a.File.Lookup(u.Name)
	if !ok {
		return Grant{}, fmt.Errorf("%s = %q: the harness's credentials file %s declares no credential %q; %s. Name a credential the file declares, or ask the harness operator to declare this one (name, env, origins, owners)",
			u.Field, u.Name, a.File.Path(), u.Name, nothing)
	}
	if !c.allows(a.Owner) {
		return Grant{}, fmt.Errorf("%s = %q: credential %q may be used only by agents of %s (credentials file %s), and agent %q is owned by %q; %s. "+
			"Name a credential declared for %q, or ask the harness operator to add %q to the credential's owners",
			u.Field, u.Name, c.Name, strings.Join(c.Owners, ", "), a.File.Path(), a.Agent, a.Owner, nothing, a.Owner, a.Owner)
	}
	if !c.boundTo(origin) {
		return Grant{}, fmt.Errorf("%s = %q: credential %q is bound to %s (credentials file %s), not to %s, the origin of %s %q; %s. "+
			"Point %s at one of those origins, or ask the harness operator to bind the credential to %s",
			u.Field, u.Name, c.Name, originList(c.Origins), a.File.Path(), origin, u.URLField, u.URL, nothing, u.URLField, origin)
	}
	return Grant{Name: c.Name, Env: c.Env, Origin: origin}, nil
}

// operatorDefault is the single-user default for the operator's own agent: the
// credential is the harness variable named, to an https or loopback URL.
func (a Authority) operatorDefault(u CredentialUse, env string, origin Origin) (Grant, error) {
	if u.Name != "" {
		if err := agentspec.CheckCredentialEnv(env); err != nil {
			return Grant{}, fmt.Errorf("%s = %q: without a credentials file (--credentials), a credential name is read as the harness variable of the same name, and this is not a variable name (%w); name a variable such as GITHUB_TOKEN, or declare the credential in a --credentials file", u.Field, u.Name, err)
		}
	}
	if allowed := os.Getenv(CredentialEnvsVar); allowed != "" {
		names := strings.FieldsFunc(allowed, func(r rune) bool { return r == ',' || r == ' ' })
		if !slices.Contains(names, env) {
			return Grant{}, fmt.Errorf("%s %q: this harness lets agents use only the credential variables in %s (%s); ask its operator to add %s, or set %s to one of those",
				u.Field, env, CredentialEnvsVar, strings.Join(names, ", "), env, lastField(u.Field))
		}
	}
	if origin.Scheme != "https" && (origin.Scheme != "http" || !IsLoopbackHost(hostOf(origin))) {
		return Grant{}, fmt.Errorf("%s %q: the credential in %s %s would be sent in clear text to a host that is not this machine; use an https:// URL (plain http:// is allowed only for localhost, 127.0.0.0/8 and ::1)",
			u.URLField, u.URL, u.Field, env)
	}
	return Grant{Env: env, Origin: origin}, nil
}

// originOf is the origin u's credential would go to.
func originOf(u CredentialUse) (Origin, error) {
	p, err := url.Parse(u.URL)
	if err != nil {
		return Origin{}, fmt.Errorf("%s %q is not a URL: %w", u.URLField, u.URL, err)
	}
	if p.Host == "" {
		return Origin{}, fmt.Errorf("%s %q has no host; give an absolute https:// URL", u.URLField, u.URL)
	}
	return OriginOf(p), nil
}

func hostOf(o Origin) string {
	h, _, err := net.SplitHostPort(o.HostPort)
	if err != nil {
		return o.HostPort
	}
	return h
}

func originList(list []Origin) string {
	s := make([]string, len(list))
	for i, o := range list {
		s[i] = o.String()
	}
	return strings.Join(s, ", ")
}

// credentialField is the new-form field beside f: "mcp_servers[0].credential" for
// "mcp_servers[0].credential_env", "model.api_key_credential" for "model.api_key_env".
func credentialField(f string) string {
	switch {
	case strings.HasSuffix(f, ".credential_env"):
		return strings.TrimSuffix(f, "_env")
	case strings.HasSuffix(f, ".api_key_env"):
		return strings.TrimSuffix(f, "_env") + "_credential"
	}
	return f
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

// credentialUse is what the model's key asks for: nil for a scripted model, which
// sends nothing. A model naming neither api_key_credential nor api_key_env uses its
// SDK's usual variable (OPENAI_API_KEY, ANTHROPIC_API_KEY), in the older form.
func (m ModelSpec) credentialUse() (*CredentialUse, error) {
	u := &CredentialUse{URLField: "model.base_url", URL: m.BaseURL}
	switch m.Provider {
	case agentspec.ModelOpenAI:
		u.Env = openaicompat.DefaultKeyEnv
		if u.URL == "" {
			u.URL = OpenAIBaseURL
		}
	case agentspec.ModelAnthropic:
		u.Env = anthropic.DefaultKeyEnv
		if u.URL == "" {
			u.URL = AnthropicBaseURL
		}
	default:
		return nil, nil
	}
	switch {
	case m.APIKeyCredential != "" && m.APIKeyEnv != "":
		return nil, errors.New("model sets both api_key_credential and api_key_env; keep api_key_credential (the credential the harness operator declared) and remove api_key_env")
	case m.APIKeyCredential != "":
		u.Field, u.Name, u.Env = "model.api_key_credential", m.APIKeyCredential, ""
	case m.APIKeyEnv != "":
		u.Field, u.Env = "model.api_key_env", m.APIKeyEnv
	default:
		u.Field = "model.api_key_env"
	}
	return u, nil
}

// AuthorizeKey decides the model's key under a: the Grant (zero for a scripted model,
// which sends nothing) or why it may not be sent.
func (m ModelSpec) AuthorizeKey(a Authority) (Grant, error) {
	u, err := m.credentialUse()
	if err != nil || u == nil {
		return Grant{}, err
	}
	return a.Authorize(*u)
}

// AuthorizeCredential decides the credential of s, the i-th of the spec's mcp_servers,
// under a. A server naming none is sent none (ok false), whatever its URL.
func (s MCPServer) AuthorizeCredential(a Authority, i int) (g Grant, ok bool, err error) {
	p := fmt.Sprintf("mcp_servers[%d]", i)
	u := CredentialUse{URLField: p + ".url", URL: s.URL}
	switch {
	case s.Credential != "" && s.CredentialEnv != "":
		return Grant{}, false, fmt.Errorf("%s sets both credential and credential_env; keep credential (the credential the harness operator declared) and remove credential_env", p)
	case s.Credential != "":
		u.Field, u.Name = p+".credential", s.Credential
	case s.CredentialEnv != "":
		u.Field, u.Env = p+".credential_env", s.CredentialEnv
	default:
		return Grant{}, false, nil
	}
	g, err = a.Authorize(u)
	return g, err == nil, err
}

// CheckCredentials decides every credential the agent's spec names under au, so that a
// run is refused before its first model call or MCP connection when one may not be
// sent, rather than part-way through.
func (a *Agent) CheckCredentials(au Authority) error {
	if _, err := a.Spec.Model.AuthorizeKey(au); err != nil {
		return fmt.Errorf("agent %q: %w", a.Name, err)
	}
	for i, s := range a.Spec.MCPServers {
		if _, _, err := s.AuthorizeCredential(au, i); err != nil {
			return fmt.Errorf("agent %q: MCP server %q: %w", a.Name, s.Name, err)
		}
	}
	return nil
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
