package mcptools

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What servers ask of the harness as their MCP client, while one of its calls runs:
//   - elicitation/create: a question for the session's user, put to them as a form
//     (Options.Asker: the web page, the API, chat's prompt) and answered, declined or
//     left to expire, under the same approvals mechanism as a held call;
//   - notifications/progress: how far a long call is, passed to the call's Progress
//     (the user sees it stream beside the call);
//   - sampling/createMessage: a prompt for the agent's model, refused unless the
//     operator's policy names the server (Options.Sampler decides and runs it).
// The harness advertises elicitation and sampling, which it answers, and neither roots
// nor anything else.

// Asker puts a server's elicitation to the session's user and waits for the answer
// (approvals.Gate).
type Asker interface {
	Elicit(ctx context.Context, e Elicitation) (Answer, error)
}

// Elicitation is a server's question to the user, from the call in flight.
type Elicitation struct {
	Asking
	Name    string // the agent's name for the server
	Message string
	Schema  any // the requested schema (JSON object), nil for none
}

// Answer is the user's answer: Action "accept" (with Content), "decline" or "cancel".
type Answer struct {
	Action  string
	Content map[string]any
}

// Sampler decides and runs a server's sampling request on the agent's model: an error
// refuses it (the server is told why).
type Sampler interface {
	Sample(ctx context.Context, o Origin, serverURL string, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)
}

// ErrNoCall: a server asked something while none of its calls was running, so there is
// no session to ask in.
var ErrNoCall = errors.New("no call of the harness is running on this server")

// inflight is the calls running on each server, so that a server's request, which the
// protocol does not tie to a call, is put to the session of the call that is running
// (a toolset serves one user's session at a time), and progress reaches its call by
// the token sent with it.
type inflight struct {
	mu     sync.Mutex
	next   int
	calls  map[string]*running // by progress token
	server map[string][]string // the tokens of each server's calls, oldest first
}

type running struct {
	origin Origin
	server string
	name   string
}

// begin records a call of name on server by o and returns its progress token.
func (f *inflight) begin(o Origin, server, name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls, f.server = map[string]*running{}, map[string][]string{}
	}
	f.next++
	tok := "tf-" + strconv.Itoa(f.next)
	f.calls[tok] = &running{origin: o, server: server, name: name}
	f.server[server] = append(f.server[server], tok)
	return tok
}

// end forgets the call of token tok.
func (f *inflight) end(tok string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.calls[tok]
	if !ok {
		return
	}
	delete(f.calls, tok)
	list := f.server[r.server]
	for i, t := range list {
		if t == tok {
			f.server[r.server] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
}

// latest is the newest call running on server.
func (f *inflight) latest(server string) (*running, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	list := f.server[server]
	if len(list) == 0 {
		return nil, false
	}
	return f.calls[list[len(list)-1]], true
}

// byToken is the call a progress token names.
func (f *inflight) byToken(tok any) (*running, bool) {
	s, ok := tok.(string)
	if !ok {
		return nil, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.calls[s]
	return r, ok
}

// clientOptions are the handlers of the client of the agent's server named name at
// url: only what the harness answers is advertised.
func (t *Toolset) clientOptions(name, url string) *mcp.ClientOptions {
	return &mcp.ClientOptions{
		// No roots: the harness has no files of its own to offer a server.
		Capabilities: &mcp.ClientCapabilities{},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return t.elicit(ctx, name, url, req.Params)
		},
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			r, ok := t.calls.latest(name)
			if !ok {
				return nil, fmt.Errorf("sampling refused: %w", ErrNoCall)
			}
			if t.opts.Sampler == nil {
				return nil, fmt.Errorf("sampling refused: this harness runs no sampling for MCP servers")
			}
			return t.opts.Sampler.Sample(ctx, r.origin, url, req.Params)
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			r, ok := t.calls.byToken(req.Params.ProgressToken)
			if !ok || r.origin.Progress == nil {
				return
			}
			r.origin.Progress(progressText(r.name, req.Params))
		},
	}
}

// elicit puts a server's question to the user of the call running on it.
func (t *Toolset) elicit(ctx context.Context, name, url string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if p.Mode == "url" {
		// A URL to open in the user's browser: not something the harness shows.
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	r, ok := t.calls.latest(name)
	if !ok || t.opts.Asker == nil {
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	a, err := t.opts.Asker.Elicit(ctx, Elicitation{Asking: t.asking(r.origin, url), Name: name, Message: p.Message, Schema: p.RequestedSchema})
	if err != nil {
		return nil, fmt.Errorf("the harness could not ask its user: %w", err)
	}
	return &mcp.ElicitResult{Action: a.Action, Content: a.Content}, nil
}

// progressText is one progress notification as the user reads it.
func progressText(name string, p *mcp.ProgressNotificationParams) string {
	s := fmt.Sprintf("%s: %g", name, p.Progress)
	if p.Total > 0 {
		s += fmt.Sprintf("/%g", p.Total)
	}
	if p.Message != "" {
		s += " " + p.Message
	}
	return s + "\n"
}
