package daytona

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Sandbox states used by the client.
const (
	SandboxStarted     = "started"
	SandboxStopped     = "stopped"
	SandboxArchived    = "archived"
	SandboxError       = "error"
	SandboxBuildFailed = "build_failed"
	SandboxDestroyed   = "destroyed"
)

// CreateSandboxRequest is CreateSandbox. With Snapshot set, do not set CPU/Memory/Disk (the
// API answers 400: resources come from the snapshot). Interval pointers distinguish "unset"
// from 0, which means something for each of them (autoStop 0 = disabled, autoArchive 0 = max,
// autoDelete 0 = delete when stopped; negative autoDelete = disabled).
type CreateSandboxRequest struct {
	Name                string              `json:"name,omitempty"`
	Snapshot            string              `json:"snapshot,omitempty"`
	User                string              `json:"user,omitempty"`
	Env                 map[string]string   `json:"env,omitempty"`
	Labels              map[string]string   `json:"labels,omitempty"`
	Public              bool                `json:"public,omitempty"`
	NetworkBlockAll     bool                `json:"networkBlockAll,omitempty"`
	NetworkAllowList    string              `json:"networkAllowList,omitempty"` // comma-separated IPv4 CIDRs, <= 10
	DomainAllowList     string              `json:"domainAllowList,omitempty"`  // comma-separated domains, <= 10
	Target              string              `json:"target,omitempty"`
	CPU                 int64               `json:"cpu,omitempty"`
	Memory              int64               `json:"memory,omitempty"`
	Disk                int64               `json:"disk,omitempty"`
	AutoStopInterval    *int                `json:"autoStopInterval,omitempty"`
	AutoArchiveInterval *int                `json:"autoArchiveInterval,omitempty"`
	AutoDeleteInterval  *int                `json:"autoDeleteInterval,omitempty"`
	Secrets             []map[string]string `json:"secrets,omitempty"` // [{ENV: secretName}]
	Volumes             []SandboxVolume     `json:"volumes,omitempty"`
}

// Sandbox is the Sandbox object (the fields trueforge uses).
type Sandbox struct {
	ID                  string            `json:"id"`
	OrganizationID      string            `json:"organizationId"`
	Name                string            `json:"name"`
	User                string            `json:"user"`
	Snapshot            string            `json:"snapshot,omitempty"`
	Env                 map[string]string `json:"env"`
	Labels              map[string]string `json:"labels"`
	Public              bool              `json:"public"`
	NetworkBlockAll     bool              `json:"networkBlockAll"`
	NetworkAllowList    string            `json:"networkAllowList,omitempty"`
	DomainAllowList     string            `json:"domainAllowList,omitempty"`
	Target              string            `json:"target"`
	CPU                 int64             `json:"cpu"`
	GPU                 int64             `json:"gpu"`
	Memory              int64             `json:"memory"`
	Disk                int64             `json:"disk"`
	State               string            `json:"state,omitempty"`
	DesiredState        string            `json:"desiredState,omitempty"`
	ErrorReason         string            `json:"errorReason,omitempty"`
	Recoverable         bool              `json:"recoverable,omitempty"`
	AutoStopInterval    *int              `json:"autoStopInterval,omitempty"`
	AutoArchiveInterval *int              `json:"autoArchiveInterval,omitempty"`
	AutoDeleteInterval  *int              `json:"autoDeleteInterval,omitempty"`
	ToolboxProxyURL     string            `json:"toolboxProxyUrl"`
	Volumes             []SandboxVolume   `json:"volumes,omitempty"` // mount paths as created (filemodes.go)
	CreatedAt           *time.Time        `json:"createdAt,omitempty"`
	UpdatedAt           *time.Time        `json:"updatedAt,omitempty"`
}

// CreateSandbox sends POST /sandbox. From a snapshot the server waits up to ~30 s for
// `started`. A state of error or build_failed in the answer is returned as an error.
func (c *Client) CreateSandbox(ctx context.Context, req CreateSandboxRequest) (*Sandbox, error) {
	if req.Target == "" {
		req.Target = c.target
	}
	var s Sandbox
	if _, err := c.do(ctx, &request{method: http.MethodPost, url: c.baseURL + "/sandbox", body: req}, &s); err != nil {
		return nil, err
	}
	if s.State == SandboxError || s.State == SandboxBuildFailed {
		return &s, fmt.Errorf("daytona: sandbox %s is %s: %s", s.ID, s.State, s.ErrorReason)
	}
	return &s, nil
}

// GetSandbox reads a sandbox by id or name (404 once destroyed).
func (c *Client) GetSandbox(ctx context.Context, idOrName string) (*Sandbox, error) {
	return call[Sandbox](ctx, c, c.api(http.MethodGet, "/sandbox/%s", esc(idOrName)))
}

// SandboxListOptions is the query of GET /sandbox (cursor pagination; limit 1..200).
type SandboxListOptions struct {
	Cursor string
	Limit  int
	Name   string            // prefix match
	Labels map[string]string // every label must match
	States []string
}

// SandboxPage is one page; NextCursor is "" on the last page.
type SandboxPage struct {
	Items      []Sandbox `json:"items"`
	NextCursor string    `json:"nextCursor"`
}

// ListSandboxes reads one page of sandboxes (eventually consistent).
func (c *Client) ListSandboxes(ctx context.Context, o SandboxListOptions) (*SandboxPage, error) {
	r := c.api(http.MethodGet, "/sandbox")
	r.query = listQuery(o.Limit, o.Name, "", "")
	setIf(r.query, "cursor", o.Cursor)
	if len(o.Labels) > 0 {
		b, _ := json.Marshal(o.Labels)
		r.query.Set("labels", string(b))
	}
	for _, s := range o.States {
		r.query.Add("states[]", s)
	}
	return call[SandboxPage](ctx, c, r)
}

// AllSandboxes walks every page.
func (c *Client) AllSandboxes(ctx context.Context, o SandboxListOptions) ([]Sandbox, error) {
	return walkCursor[Sandbox](ctx, &o, &o.Cursor, c.ListSandboxes)
}

func (p *SandboxPage) page() ([]Sandbox, string) { return p.Items, p.NextCursor }

func (c *Client) lifecycle(ctx context.Context, r *request) (*Sandbox, error) {
	return call[Sandbox](ctx, c, r)
}

// StartSandbox starts a stopped or archived sandbox (a no-op if started). The answer has a
// transitional state; use WaitSandbox.
func (c *Client) StartSandbox(ctx context.Context, id string) (*Sandbox, error) {
	r := c.api(http.MethodPost, "/sandbox/%s/start", esc(id))
	r.idempotent = true
	return c.lifecycle(ctx, r)
}

// StopSandbox stops a started or paused sandbox; force sends SIGKILL.
func (c *Client) StopSandbox(ctx context.Context, id string, force bool) (*Sandbox, error) {
	r := c.api(http.MethodPost, "/sandbox/%s/stop", esc(id))
	r.idempotent = true
	if force {
		r.query = url.Values{"force": {"true"}}
	}
	return c.lifecycle(ctx, r)
}

// ArchiveSandbox archives a stopped sandbox.
func (c *Client) ArchiveSandbox(ctx context.Context, id string) (*Sandbox, error) {
	r := c.api(http.MethodPost, "/sandbox/%s/archive", esc(id))
	r.idempotent = true
	return c.lifecycle(ctx, r)
}

// DeleteSandbox soft-deletes a sandbox; its name is free at once.
func (c *Client) DeleteSandbox(ctx context.Context, id string) error {
	return c.remove(ctx, "/sandbox/%s", esc(id))
}

// SetSandboxSecrets replaces the sandbox's whole secret set (PUT /sandbox/{id}/secrets);
// an empty list detaches all.
func (c *Client) SetSandboxSecrets(ctx context.Context, id string, secrets []map[string]string) (*Sandbox, error) {
	if secrets == nil {
		secrets = []map[string]string{}
	}
	r := c.api(http.MethodPut, "/sandbox/%s/secrets", esc(id))
	r.body = map[string]any{"secrets": secrets}
	return c.lifecycle(ctx, r)
}

// NetworkSettings is UpdateSandboxNetworkSettings; nil fields are left alone, "" clears a list.
type NetworkSettings struct {
	NetworkBlockAll  *bool   `json:"networkBlockAll,omitempty"`
	NetworkAllowList *string `json:"networkAllowList,omitempty"`
	DomainAllowList  *string `json:"domainAllowList,omitempty"`
}

// UpdateNetworkSettings changes egress rules of a (running) sandbox.
func (c *Client) UpdateNetworkSettings(ctx context.Context, id string, ns NetworkSettings) (*Sandbox, error) {
	r := c.api(http.MethodPost, "/sandbox/%s/network-settings", esc(id))
	r.body, r.idempotent = ns, true
	return c.lifecycle(ctx, r)
}

// WaitSandbox polls until the sandbox reaches state, failing on error or build_failed.
func (c *Client) WaitSandbox(ctx context.Context, id, state string) (*Sandbox, error) {
	for {
		s, err := c.GetSandbox(ctx, id)
		if err != nil {
			return nil, err
		}
		switch s.State {
		case state:
			return s, nil
		case SandboxError, SandboxBuildFailed:
			return s, fmt.Errorf("daytona: sandbox %s is %s: %s", id, s.State, s.ErrorReason)
		}
		if err := sleep(ctx, c.poll); err != nil {
			return s, fmt.Errorf("daytona: sandbox %s still %s, want %s: %w", id, s.State, state, err)
		}
	}
}
