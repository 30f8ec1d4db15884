// Package mcptools exposes an agent's MCP servers to its model as tools, through the
// MCP Go SDK's streamable HTTP client. The harness is the MCP client: each server's
// credential (the agent's credential, or credential_env in the older form) is read from
// the harness environment variable it grants and sent as a bearer token by the HTTP
// transport at each request, so it never enters a sandbox, the store or a log, and a
// rotated value is picked up at once.
//
// The credential is the harness operator's and reaches only an origin it is bound to:
// before connecting, Options.Credentials (agents.Authority) decides it from the
// operator's credentials file and the agent's owner (a refusal sends nothing); the
// transport adds the token only to requests for the URL's own scheme and host:port;
// and a redirect to any other scheme or host:port is refused.
//
// Tool names: "<server>__<tool>" (model APIs allow only letters, digits, _ and -); an
// allowed_tools list, when given, limits which tools are exposed and callable. Servers
// are connected on first use (listing tools for the first prompt of a run), never for
// the sandbox; a server that cannot be reached is left out of the tool list with a
// warning rather than failing the turn. MCP calls never provision a sandbox.
package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
)

// Separator joins a server's name and a tool's name in the model's tool list.
const Separator = "__"

// Options configure a Toolset.
type Options struct {
	HTTPClient *http.Client        // base client; nil means http.DefaultClient
	Getenv     func(string) string // nil means os.Getenv
	Logger     *slog.Logger
	Version    string
	// User and Agent say on whose behalf the harness calls: every request to a server
	// carries them (UserHeader, AgentHeader), so the server can act for that subject,
	// and the Policy decides each call by them.
	User, Agent string
	// Owner is the agent's owner, which the Policy decides by.
	Owner string
	// Policy is the operator's rules for MCP calls (nil allows what allowed_tools does).
	Policy Decider
	// Credentials decides which server may be sent which credential; the zero
	// Authority sends none (a server naming one is then not connected).
	Credentials agents.Authority
	// Approver asks a person about the calls a policy rule says need approval; nil
	// refuses those calls.
	Approver Approver
	// Budgets charges the policy's cumulative budgets; nil charges none.
	Budgets Budgets
	// Asker puts servers' elicitations to the session's user; nil declines them.
	Asker Asker
	// Sampler decides and runs servers' sampling requests; nil refuses them.
	Sampler Sampler
}

// Headers that name the subject of a call to an MCP server: the user the harness acts
// for (a session's owner) and the agent. Sent only to the server's own origin, like the
// credential.
const (
	UserHeader  = "X-Trueforge-User"
	AgentHeader = "X-Trueforge-Agent"
)

// Decider is the operator's policy, as the toolset asks it (policy.Policy): each call
// is decided by the server's URL and its own tool name, the user and the agent's owner.
type Decider interface {
	Decide(policy.Request) policy.Decision
}

// Toolset is the MCP tools of one agent.
type Toolset struct {
	servers []agents.MCPServer
	opts    Options

	mu       sync.Mutex
	sessions map[string]*mcp.ClientSession
	routes   map[string]route
	specs    []model.ToolSpec
	descs    []Descriptor
	listed   bool

	calls inflight // the calls running on each server
}

type route struct {
	server, tool string
	url          string         // the server's URL, which the policy decides by
	output       map[string]any // the tool's output schema, nil when it declares none
}

// New returns the toolset of an agent's MCP servers; nothing is connected yet.
func New(servers []agents.MCPServer, opts Options) *Toolset {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Toolset{servers: servers, opts: opts, sessions: map[string]*mcp.ClientSession{}, routes: map[string]route{}}
}

// bearer adds the server's credential, read at each request, to requests for the
// server's origin only. The check is here, at the last step before the wire, because
// http.Client sends each redirect through the same transport: a transport that added
// the token to every request would hand it to whatever host a redirect names.
type bearer struct {
	base   http.RoundTripper
	origin agents.Origin
	env    string
	getenv func(string) string
	// subject is added to requests for the origin (UserHeader, AgentHeader).
	user, agent string
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if agents.OriginOf(req.URL) == b.origin && (b.user != "" || b.agent != "") {
		req = req.Clone(req.Context())
		setHeader(req.Header, UserHeader, b.user)
		setHeader(req.Header, AgentHeader, b.agent)
	} else if req.Header.Get(UserHeader) != "" || req.Header.Get(AgentHeader) != "" {
		req = req.Clone(req.Context())
		req.Header.Del(UserHeader)
		req.Header.Del(AgentHeader)
	}
	if b.env == "" {
		return b.base.RoundTrip(req)
	}
	if agents.OriginOf(req.URL) != b.origin {
		if req.Header.Get("Authorization") != "" {
			// Not ours, but whatever set it, no credential goes to another host.
			req = req.Clone(req.Context())
			req.Header.Del("Authorization")
		}
		return b.base.RoundTrip(req)
	}
	v := b.getenv(b.env)
	if v == "" {
		return nil, fmt.Errorf("the MCP credential variable %s is not set in the harness's environment", b.env)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+v)
	return b.base.RoundTrip(req)
}

func setHeader(h http.Header, name, v string) {
	if v == "" {
		h.Del(name)
		return
	}
	h.Set(name, v)
}

// connect opens the session of s, the i-th of the agent's mcp_servers. The credential
// is decided first (Options.Credentials), so a refused one is never sent, nor is the
// server dialled.
func (t *Toolset) connect(ctx context.Context, i int, s agents.MCPServer) (*mcp.ClientSession, error) {
	if cs, ok := t.sessions[s.Name]; ok {
		return cs, nil
	}
	grant, _, err := s.AuthorizeCredential(t.opts.Credentials, i)
	if err != nil {
		return nil, fmt.Errorf("MCP server %q: %w", s.Name, err)
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		return nil, fmt.Errorf("MCP server %q: mcp_servers[%d].url %q is not a URL: %w", s.Name, i, s.URL, err)
	}
	want := agents.OriginOf(u)
	base := t.opts.HTTPClient.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc := *t.opts.HTTPClient
	hc.Transport = bearer{base: traced{base: base}, origin: want, env: grant.Env, getenv: t.opts.Getenv, user: t.opts.User, agent: t.opts.Agent}
	hc.CheckRedirect = agents.SameOriginRedirects(fmt.Sprintf("MCP server %q", s.Name), "if the server has moved, set its url to the new address", t.opts.HTTPClient.CheckRedirect)
	client := mcp.NewClient(&mcp.Implementation{Name: "trueforge-harness", Version: t.opts.Version}, t.clientOptions(s.Name, s.URL))
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: &hc, MaxRetries: 1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to MCP server %q: %w", s.Name, err)
	}
	t.sessions[s.Name] = cs
	return cs, nil
}

func allowed(s agents.MCPServer, tool string) bool {
	if s.AllowedTools == nil {
		return true
	}
	for _, a := range s.AllowedTools {
		if a == tool {
			return true
		}
	}
	return false
}

// Specs lists the tools of every reachable server (once per Toolset).
func (t *Toolset) Specs(ctx context.Context) []model.ToolSpec {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.listed {
		return t.specs
	}
	t.listed = true
	for i, s := range t.servers {
		cs, err := t.connect(ctx, i, s)
		if err == nil {
			var res *mcp.ListToolsResult
			if res, err = cs.ListTools(ctx, nil); err == nil {
				for _, tool := range res.Tools {
					if !allowed(s, tool.Name) {
						continue
					}
					name := s.Name + Separator + tool.Name
					schema := asObject(tool.InputSchema)
					if schema == nil {
						schema = map[string]any{"type": "object", "properties": map[string]any{}}
					}
					t.routes[name] = route{s.Name, tool.Name, s.URL, asObject(tool.OutputSchema)}
					t.descs = append(t.descs, Descriptor{Name: name, Server: s.Name, Tool: tool.Name, Description: tool.Description,
						Input: schema, Output: asObject(tool.OutputSchema)})
					t.specs = append(t.specs, model.ToolSpec{Name: name, Description: fmt.Sprintf("[MCP %s] %s", s.Name, tool.Description), Parameters: schema})
				}
			}
		}
		if err != nil {
			t.opts.Logger.Warn("MCP server left out of the tool list", "server", s.Name, "err", err)
		}
	}
	return t.specs
}

// Has reports whether name is one of this toolset's tools.
func (t *Toolset) Has(name string) bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.routes[name]
	return ok
}

// Call runs an MCP tool for the model's call o and returns its text and whether it is
// an error result.
func (t *Toolset) Call(ctx context.Context, o Origin, name string, args json.RawMessage) (string, bool) {
	var a map[string]any
	if len(args) > 0 {
		if err := json.Unmarshal(args, &a); err != nil {
			return "the arguments are not a JSON object: " + err.Error(), true
		}
	}
	v, err := t.CallValue(ctx, o, name, a)
	switch {
	case errors.Is(err, ErrUnknownTool):
		return fmt.Sprintf("unknown MCP tool %q", name), true
	case errors.Is(err, ErrDenied), errors.Is(err, ErrOverBudget):
		return v.Refusal, true
	case err != nil:
		return err.Error(), true
	}
	if v.Text == "" && v.HasStructured {
		raw, _ := json.Marshal(v.Structured)
		return string(raw), v.IsError
	}
	return v.Text, v.IsError
}

// Close ends every MCP session.
func (t *Toolset) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, cs := range t.sessions {
		_ = cs.Close()
		delete(t.sessions, name)
	}
}
