package daytona

import (
	"context"
	"net/http"
	"time"
)

// SecretName is the Daytona secret that carries variable envName of a trueforge
// environment: "trueforge-<environment>--<envName>". Environment names never end in '-'
// and variable names have no '-', so the last "--" splits it back unambiguously, and it
// fits Daytona's name rule ^[a-zA-Z_][a-zA-Z0-9_-]*$. The provider creates secrets under
// this name and the harness attaches them to sandboxes by it (CreateRequest.Secrets).
func SecretName(environment, envName string) string {
	return "trueforge-" + environment + "--" + envName
}

// Secret is an org secret's metadata. Daytona never returns the value; sandboxes see only
// Placeholder, which its egress proxy swaps for the value on requests to Hosts.
type Secret struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Description string    `json:"description,omitempty"`
	Placeholder string    `json:"placeholder"`
	Hosts       []string  `json:"hosts"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// CreateSecretRequest is CreateSecret. Hosts are exact hostnames or "*." wildcards.
type CreateSecretRequest struct {
	Name        string   `json:"name"`
	Value       string   `json:"value"`
	Description string   `json:"description,omitempty"`
	Hosts       []string `json:"hosts,omitempty"`
}

// UpdateSecretRequest is UpdateSecret: nil fields are left alone; a non-nil empty Hosts
// clears the host list.
type UpdateSecretRequest struct {
	Value       *string   `json:"value,omitempty"`
	Description *string   `json:"description,omitempty"`
	Hosts       *[]string `json:"hosts,omitempty"`
}

// CreateSecret sends POST /secret (needs manage:secrets; 409 on a duplicate name).
func (c *Client) CreateSecret(ctx context.Context, req CreateSecretRequest) (*Secret, error) {
	return call[Secret](ctx, c, &request{method: http.MethodPost, url: c.baseURL + "/secret", body: req})
}

// GetSecret reads a secret's metadata.
func (c *Client) GetSecret(ctx context.Context, id string) (*Secret, error) {
	return call[Secret](ctx, c, c.api(http.MethodGet, "/secret/%s", esc(id)))
}

// SecretListOptions is the query of GET /secret/paginated.
type SecretListOptions struct {
	Cursor      string
	Limit       int
	Name        string // partial match
	Sort, Order string
}

// SecretPage is one page of secrets; NextCursor is "" on the last page.
type SecretPage struct {
	Items      []Secret `json:"items"`
	Total      int      `json:"total"`
	NextCursor string   `json:"nextCursor"`
}

// ListSecrets reads one page of GET /secret/paginated.
func (c *Client) ListSecrets(ctx context.Context, o SecretListOptions) (*SecretPage, error) {
	r := c.api(http.MethodGet, "/secret/paginated")
	r.query = listQuery(o.Limit, o.Name, o.Sort, o.Order)
	setIf(r.query, "cursor", o.Cursor)
	return call[SecretPage](ctx, c, r)
}

// AllSecrets walks every page.
func (c *Client) AllSecrets(ctx context.Context, o SecretListOptions) ([]Secret, error) {
	return walkCursor[Secret](ctx, &o, &o.Cursor, c.ListSecrets)
}

func (p *SecretPage) page() ([]Secret, string) { return p.Items, p.NextCursor }

// UpdateSecret sends PATCH /secret/{id} (rotation, hosts). Repeating it has the same effect,
// so it is retried like an idempotent call.
func (c *Client) UpdateSecret(ctx context.Context, id string, req UpdateSecretRequest) (*Secret, error) {
	return patch[Secret](ctx, c, req, "/secret/%s", esc(id))
}

// DeleteSecret sends DELETE /secret/{id}.
func (c *Client) DeleteSecret(ctx context.Context, id string) error {
	return c.remove(ctx, "/secret/%s", esc(id))
}
