package daytona

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Snapshot states.
const (
	SnapshotPending     = "pending"
	SnapshotBuilding    = "building"
	SnapshotPulling     = "pulling"
	SnapshotActive      = "active"
	SnapshotInactive    = "inactive"
	SnapshotError       = "error"
	SnapshotBuildFailed = "build_failed"
	SnapshotRemoving    = "removing"
)

// BuildInfo is a declarative (Dockerfile) build.
type BuildInfo struct {
	DockerfileContent string   `json:"dockerfileContent"`
	ContextHashes     []string `json:"contextHashes,omitempty"`
}

// CreateSnapshotRequest is the body of POST /snapshots. Exactly one of ImageName and
// BuildInfo is set. Memory and Disk are GB.
type CreateSnapshotRequest struct {
	Name       string     `json:"name"`
	ImageName  string     `json:"imageName,omitempty"`
	BuildInfo  *BuildInfo `json:"buildInfo,omitempty"`
	Entrypoint []string   `json:"entrypoint,omitempty"`
	CPU        int64      `json:"cpu,omitempty"`
	GPU        int64      `json:"gpu,omitempty"`
	// GPUType is the ordered list of preferred GPU types (the scheduler takes the first
	// one with capacity).
	GPUType  []string `json:"gpuType,omitempty"`
	Memory   int64    `json:"memory,omitempty"`
	Disk     int64    `json:"disk,omitempty"`
	RegionID string   `json:"regionId,omitempty"`
}

// Snapshot is a SnapshotDto. Note the response says `mem` where the request says `memory`.
type Snapshot struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	General     bool       `json:"general"`
	ImageName   string     `json:"imageName,omitempty"`
	State       string     `json:"state"`
	Size        *float64   `json:"size"`
	Entrypoint  []string   `json:"entrypoint"`
	CPU         int64      `json:"cpu"`
	GPU         int64      `json:"gpu"`
	GPUType     string     `json:"gpuType,omitempty"`
	Mem         int64      `json:"mem"`
	Disk        int64      `json:"disk"`
	ErrorReason string     `json:"errorReason"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	LastUsedAt  *time.Time `json:"lastUsedAt"`
	BuildInfo   *BuildInfo `json:"buildInfo,omitempty"`
	RegionIDs   []string   `json:"regionIds"`
}

// Terminal reports whether polling can stop: active, error or build_failed.
func (s *Snapshot) Terminal() bool {
	return s.State == SnapshotActive || s.State == SnapshotError || s.State == SnapshotBuildFailed
}

// CreateSnapshot sends POST /snapshots (200 SnapshotDto; 409 on a duplicate name). It is not
// retried after a 5xx: a retry could meet its own snapshot as a duplicate.
func (c *Client) CreateSnapshot(ctx context.Context, req CreateSnapshotRequest) (*Snapshot, error) {
	return call[Snapshot](ctx, c, &request{method: http.MethodPost, url: c.baseURL + "/snapshots", body: req})
}

// GetSnapshot reads a snapshot by UUID or name.
func (c *Client) GetSnapshot(ctx context.Context, idOrName string) (*Snapshot, error) {
	return call[Snapshot](ctx, c, c.api(http.MethodGet, "/snapshots/%s", esc(idOrName)))
}

// SnapshotListOptions are the query of GET /snapshots (page numbers from 1; limit <= 200).
type SnapshotListOptions struct {
	Page, Limit int
	Name        string // partial match
	Sort, Order string
}

// SnapshotPage is PaginatedSnapshots.
type SnapshotPage struct {
	Items      []Snapshot `json:"items"`
	Total      int        `json:"total"`
	Page       int        `json:"page"`
	TotalPages int        `json:"totalPages"`
}

// ListSnapshots reads one page of snapshots.
func (c *Client) ListSnapshots(ctx context.Context, o SnapshotListOptions) (*SnapshotPage, error) {
	r := c.api(http.MethodGet, "/snapshots")
	r.query = listQuery(o.Limit, o.Name, o.Sort, o.Order)
	setIfPositive(r.query, "page", o.Page)
	return call[SnapshotPage](ctx, c, r)
}

// AllSnapshots walks every page of GET /snapshots.
func (c *Client) AllSnapshots(ctx context.Context, o SnapshotListOptions) ([]Snapshot, error) {
	var all []Snapshot
	for page := 1; ; page++ {
		o.Page = page
		p, err := c.ListSnapshots(ctx, o)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Items...)
		if page >= p.TotalPages || len(p.Items) == 0 {
			return all, nil
		}
	}
}

// DeleteSnapshot deletes by UUID (the state becomes `removing`; the row goes later).
func (c *Client) DeleteSnapshot(ctx context.Context, id string) error {
	return c.remove(ctx, "/snapshots/%s", esc(id))
}

// ActivateSnapshot re-activates an inactive snapshot by UUID (400 unless it is inactive).
func (c *Client) ActivateSnapshot(ctx context.Context, id string) (*Snapshot, error) {
	r := c.api(http.MethodPost, "/snapshots/%s/activate", esc(id))
	r.idempotent = true
	return call[Snapshot](ctx, c, r)
}

// SnapshotBuildLogsURL returns the URL of a snapshot's build log (GET
// /snapshots/{id}/build-logs-url; the server waits up to 30 s for a runner).
func (c *Client) SnapshotBuildLogsURL(ctx context.Context, id string) (string, error) {
	var u struct {
		URL string `json:"url"`
	}
	if _, err := c.do(ctx, c.api(http.MethodGet, "/snapshots/%s/build-logs-url", esc(id)), &u); err != nil {
		return "", err
	}
	return u.URL, nil
}

// SnapshotBuildLogs fetches the (non-following) build log text of a snapshot.
func (c *Client) SnapshotBuildLogs(ctx context.Context, id string) (string, error) {
	u, err := c.SnapshotBuildLogsURL(ctx, id)
	if err != nil {
		return "", err
	}
	b, err := c.do(ctx, &request{method: http.MethodGet, url: u, idempotent: true}, nil)
	return string(b), err
}

// WaitSnapshot polls GET /snapshots/{idOrName} until the state is terminal (active, error,
// build_failed) or ctx ends. It returns the last snapshot seen.
func (c *Client) WaitSnapshot(ctx context.Context, idOrName string) (*Snapshot, error) {
	for {
		s, err := c.GetSnapshot(ctx, idOrName)
		if err != nil {
			return nil, err
		}
		if s.Terminal() {
			return s, nil
		}
		if err := sleep(ctx, c.poll); err != nil {
			return s, fmt.Errorf("daytona: snapshot %s still %s: %w", idOrName, s.State, err)
		}
	}
}

// listQuery is the query every list call shares, each parameter left out when unset
// (the server's default): a page's size (limit), a name filter, a sort field and order.
func listQuery(limit int, name, sort, order string) url.Values {
	q := url.Values{}
	setIfPositive(q, "limit", limit)
	setIf(q, "name", name)
	setIf(q, "sort", sort)
	setIf(q, "order", order)
	return q
}

// setIf sets query parameter k to v unless v is empty.
func setIf(q url.Values, k, v string) {
	if v != "" {
		q.Set(k, v)
	}
}

// setIfPositive sets query parameter k to n when n is above 0; else it is left out, for
// the server's default.
func setIfPositive(q url.Values, k string, n int) {
	if n > 0 {
		q.Set(k, strconv.Itoa(n))
	}
}
