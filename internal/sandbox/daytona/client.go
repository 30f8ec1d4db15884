// Package daytona is trueforge's own small REST client for the Daytona API (the official Go
// SDK is not available to this module) and a sandbox.SnapshotBuilder on top of it.
//
// Facts about paths, field names and semantics come from the project's reference notes on the
// Daytona API (v0.190 server source and v0.205 OpenAPI spec). Every call takes a context; all
// waits (retries, backoff, polling) end when it does, so Terraform timeouts bound them.
//
// Defaults and limits:
//   - requests: 60 s per HTTP request; retries per DefaultRetryPolicy (8 attempts, backoff
//     from 500 ms to 30 s with full jitter, server waits capped at 2 min, 409 "state change
//     in progress" retried for up to 5 min); polling every 1 s (WithPollInterval).
//   - snapshots (Builder): named by the build hash ("snap-<20 hex>"), built from a Dockerfile
//     FROM the environment's image or, for "platform", DefaultReleaseImage, with the build
//     script in one RUN; an active one is reused, an inactive one re-activated, a failed one
//     deleted and rebuilt; refresh only reads (inactive reads as Failed, InactiveReason);
//     build log tail 4 KiB.
//   - sandboxes (Runtime): name = the runtime's id, labels trueforge.managed=true and
//     trueforge.id=<id> plus Runtime.Labels and the request's; work directory
//     DefaultWorkDir (/workspace, made by every build); auto-stop 15 min, auto-archive
//     7 days, auto-delete never (Default*); files up to 64 MiB; at most 10 allowed domains;
//     limits must equal the snapshot's resources (what Daytona enforces) and harness egress
//     proxies are refused (network policy is networkBlockAll and domainAllowList).
//   - commands (Runtime.Exec): one session command each (session.go, interactive.go),
//     never /process/execute, whose command outlives a cancelled caller; logs polled
//     every 2 ms while output flows or input was just sent, backing off to 50 ms
//     (interactive) or 500 ms (plain); session calls 30 s per attempt.
//   - uploads: /files/bulk-upload, which daemons without /files/upload-v2 have too.
package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// DefaultBaseURL is Daytona's public API base URL; every API path is relative to it.
const DefaultBaseURL = "https://app.daytona.io/api"

// SDKVersion is sent as X-Daytona-SDK-Version. Versions >= 0.167.0 make the toolbox return
// structured (JSON) session logs.
const SDKVersion = "0.190.0"

// Source is sent as X-Daytona-Source.
const Source = "trueforge"

// Client talks to one Daytona API with one token. It is safe for concurrent use.
type Client struct {
	baseURL string
	apiKey  string
	orgID   string
	target  string
	hc      *http.Client
	// reqTimeout bounds an attempt of a call without a timeout of its own.
	reqTimeout time.Duration
	retry      RetryPolicy
	poll       time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (default: http.Client with no timeout of its own;
// each request gets a deadline, see DefaultRequestTimeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithOrganizationID sends X-Daytona-Organization-ID. Only use it with a JWT: an API key
// belongs to exactly one organization.
func WithOrganizationID(id string) Option { return func(c *Client) { c.orgID = id } }

// WithTarget sets the default region (e.g. "us", "eu") for created sandboxes.
func WithTarget(target string) Option { return func(c *Client) { c.target = target } }

// WithRetryPolicy replaces the retry policy.
func WithRetryPolicy(p RetryPolicy) Option { return func(c *Client) { c.retry = p } }

// WithRequestTimeout sets the deadline of one attempt of a call that sets none of its own
// (default DefaultRequestTimeout).
func WithRequestTimeout(d time.Duration) Option { return func(c *Client) { c.reqTimeout = d } }

// WithPollInterval sets the interval of the Wait* helpers (default 1 s, like the Go SDK).
func WithPollInterval(d time.Duration) Option { return func(c *Client) { c.poll = d } }

// New returns a client for baseURL (DefaultBaseURL when empty) authenticating with apiKey.
func New(baseURL, apiKey string, opts ...Option) *Client {
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	c := &Client{
		baseURL:    strings.TrimRight(baseURL, "/"),
		apiKey:     apiKey,
		hc:         &http.Client{},
		reqTimeout: DefaultRequestTimeout,
		retry:      DefaultRetryPolicy(),
		poll:       time.Second,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// BaseURL returns the API base URL.
func (c *Client) BaseURL() string { return c.baseURL }

// request describes one API call.
type request struct {
	method string
	url    string // absolute URL (API or toolbox)
	query  url.Values
	body   any    // JSON-encoded unless rawBody is set
	raw    []byte // raw body (octet-stream)
	// rawType is raw's Content-Type when it is not application/octet-stream.
	rawType string
	// idempotent marks calls that may be retried after a 5xx: the request either had no
	// effect or repeating it has the same effect.
	idempotent bool
	// timeout bounds one attempt; 0 means DefaultRequestTimeout. A command runs for as
	// long as its own timeout, so exec sets that plus a margin.
	timeout time.Duration
}

// maxResponse caps a response body; a larger one is an error wrapping
// sandbox.ErrTooLarge rather than a silently cut body.
const maxResponse = 64 << 20

// DefaultRequestTimeout bounds one attempt of an API or toolbox call that does not say
// otherwise. It is a per-request deadline, not the HTTP client's, because a command may
// legitimately run for up to its own timeout (30 minutes in the harness) before the
// daemon answers.
const DefaultRequestTimeout = 60 * time.Second

func (c *Client) api(method, path string, a ...any) *request {
	return &request{method: method, url: c.baseURL + fmt.Sprintf(path, a...),
		idempotent: method == http.MethodGet || method == http.MethodDelete || method == http.MethodPut}
}

// esc escapes one path segment (names may contain '/').
func esc(s string) string { return url.PathEscape(s) }

// do runs r with retries and decodes a 2xx JSON body into out (if non-nil). It returns the raw
// body for callers that want text.
func (c *Client) do(ctx context.Context, r *request, out any) ([]byte, error) {
	var payload []byte
	ctype := ""
	switch {
	case r.raw != nil:
		payload, ctype = r.raw, "application/octet-stream"
		if r.rawType != "" {
			ctype = r.rawType
		}
	case r.body != nil:
		b, err := json.Marshal(r.body)
		if err != nil {
			return nil, fmt.Errorf("daytona: encode %s %s: %w", r.method, r.url, err)
		}
		payload, ctype = b, "application/json"
	}
	u := r.url
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		body, err := c.once(ctx, r.method, u, payload, ctype, r.timeout)
		if err == nil {
			if out != nil && len(bytes.TrimSpace(body)) > 0 {
				if err := json.Unmarshal(body, out); err != nil {
					return body, fmt.Errorf("daytona: decode %s %s: %w", r.method, r.url, err)
				}
			}
			return body, nil
		}
		wait, retry := c.retry.decide(attempt, time.Since(start), r.idempotent, err)
		if !retry || ctx.Err() != nil {
			return nil, err
		}
		if serr := sleep(ctx, wait); serr != nil {
			return nil, fmt.Errorf("%w (gave up waiting to retry: %w)", err, serr)
		}
	}
}

// once sends one HTTP request. err is an *APIError for non-2xx answers.
func (c *Client) once(ctx context.Context, method, u string, payload []byte, ctype string, timeout time.Duration) ([]byte, error) {
	if timeout <= 0 {
		timeout = c.reqTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("daytona: %s %s: %w", method, u, err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("X-Daytona-SDK-Version", SDKVersion)
	req.Header.Set("X-Daytona-Source", Source)
	if c.orgID != "" {
		req.Header.Set("X-Daytona-Organization-ID", c.orgID)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("daytona: %s %s: %w", method, redact(u), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, fmt.Errorf("daytona: %s %s: read body: %w", method, redact(u), err)
	}
	if len(body) > maxResponse {
		return nil, fmt.Errorf("daytona: %s %s: response over %d bytes: %w", method, redact(u), maxResponse, sandbox.ErrTooLarge)
	}
	if resp.StatusCode/100 != 2 {
		return nil, newAPIError(method, redact(u), resp, body)
	}
	return body, nil
}

// redact drops the query string from a URL for error messages.
func redact(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i]
	}
	return u
}

// APIKey is what GET /api-keys/current says about the calling key.
type APIKey struct {
	Name        string     `json:"name"`
	Value       string     `json:"value"` // masked
	CreatedAt   time.Time  `json:"createdAt"`
	Permissions []string   `json:"permissions"`
	LastUsedAt  *time.Time `json:"lastUsedAt,omitempty"`
	ExpiresAt   *time.Time `json:"expiresAt,omitempty"`
	UserID      string     `json:"userId"`
}

// CurrentAPIKey introspects the calling API key (API-key auth only: the route allows only the
// API-key strategy, so a JWT fails authentication and gets 401 "Invalid credentials",
// apps/api/src/auth/global-auth.guard.ts:62-65, v0.190; the controller's 403 is never reached).
func (c *Client) CurrentAPIKey(ctx context.Context) (*APIKey, error) {
	return call[APIKey](ctx, c, c.api(http.MethodGet, "/api-keys/current"))
}

// Missing returns the permissions in need that the key does not hold, in the order given.
func (k *APIKey) Missing(need ...string) []string {
	have := make(map[string]bool, len(k.Permissions))
	for _, p := range k.Permissions {
		have[p] = true
	}
	var miss []string
	for _, p := range need {
		if !have[p] {
			miss = append(miss, p)
		}
	}
	return miss
}

// RequirePermissions checks the calling key for every permission in need. It returns a
// *MissingPermissionsError naming each missing one.
func (c *Client) RequirePermissions(ctx context.Context, need ...string) (*APIKey, error) {
	k, err := c.CurrentAPIKey(ctx)
	if err != nil {
		return nil, err
	}
	if miss := k.Missing(need...); len(miss) > 0 {
		return k, &MissingPermissionsError{KeyName: k.Name, Missing: miss}
	}
	return k, nil
}

// call sends r and decodes its answer into a new T: the shape of every call that
// answers with one object.
func call[T any](ctx context.Context, c *Client, r *request) (*T, error) {
	var v T
	if _, err := c.do(ctx, r, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// page is one page of a cursor-paginated list: its items and the next cursor, which is
// empty on the last page.
type page[T any] interface {
	page() ([]T, string)
}

// walkCursor collects every item of a cursor-paginated list: list reads the page that *o
// asks for, starting at the cursor *o already holds; cursor points at o's cursor field,
// which walkCursor moves on from page to page.
func walkCursor[T any, P page[T], O any](ctx context.Context, o *O, cursor *string, list func(context.Context, O) (P, error)) ([]T, error) {
	var all []T
	for {
		p, err := list(ctx, *o)
		if err != nil {
			return nil, err
		}
		items, next := p.page()
		all = append(all, items...)
		if next == "" {
			return all, nil
		}
		*cursor = next
	}
}

// patch sends PATCH to the path made of format and a, with body, and decodes the answer
// into a new T: the shape of every update. Repeating an update has the same effect, so
// it is retried like an idempotent call.
func patch[T any](ctx context.Context, c *Client, body any, format string, a ...any) (*T, error) {
	r := c.api(http.MethodPatch, format, a...)
	r.body, r.idempotent = body, true
	return call[T](ctx, c, r)
}

// remove sends DELETE to the path made of format and a, ignoring any answer body: the
// shape of every delete call.
func (c *Client) remove(ctx context.Context, format string, a ...any) error {
	_, err := c.do(ctx, c.api(http.MethodDelete, format, a...), nil)
	return err
}
