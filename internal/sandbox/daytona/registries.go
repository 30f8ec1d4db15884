package daytona

import (
	"context"
	"net/http"
	"time"
)

// Docker registries (private images). Sources: the OpenAPI document (daytona/clients
// openapi-specs/api.json: CreateDockerRegistry, UpdateDockerRegistry, DockerRegistry) and
// apps/api/src/docker-registry/services/docker-registry.service.ts (v0.190): the URL is
// stored without trailing slashes ("docker.io" for Docker Hub or an empty URL); a
// snapshot's image is pulled with the organization registry whose URL matches its host
// (findSourceRegistryBySnapshotImageName); an update sets name, url, username and
// project (an omitted project is kept), and the password only when one is sent; delete
// answers 204.

// DockerRegistry is the DockerRegistry object (never the password).
type DockerRegistry struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	URL          string    `json:"url"`
	Username     string    `json:"username"`
	Project      string    `json:"project"`
	RegistryType string    `json:"registryType"`
	CreatedAt    time.Time `json:"createdAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

// CreateDockerRegistryRequest is CreateDockerRegistry.
type CreateDockerRegistryRequest struct {
	Name     string `json:"name"`
	URL      string `json:"url"`
	Username string `json:"username"`
	Password string `json:"password"`
	Project  string `json:"project,omitempty"`
}

// UpdateDockerRegistryRequest is UpdateDockerRegistry: name, url and username are
// required; an empty Password leaves the password as it is. Project is always sent:
// Daytona keeps the stored project when the property is omitted and clears it on ""
// (update() in docker-registry.service.ts:151-159, v0.190; TypeORM skips undefined), so
// an omitted empty project would never remove one.
type UpdateDockerRegistryRequest struct {
	Name     string `json:"name"`
	URL      string `json:"url"`
	Username string `json:"username"`
	Password string `json:"password,omitempty"`
	Project  string `json:"project"`
}

// CreateDockerRegistry sends POST /docker-registry (needs write:registries).
func (c *Client) CreateDockerRegistry(ctx context.Context, req CreateDockerRegistryRequest) (*DockerRegistry, error) {
	return call[DockerRegistry](ctx, c, &request{method: http.MethodPost, url: c.baseURL + "/docker-registry", body: req})
}

// GetDockerRegistry sends GET /docker-registry/{id}.
func (c *Client) GetDockerRegistry(ctx context.Context, id string) (*DockerRegistry, error) {
	return call[DockerRegistry](ctx, c, c.api(http.MethodGet, "/docker-registry/%s", esc(id)))
}

// ListDockerRegistries sends GET /docker-registry (the organization's registries).
func (c *Client) ListDockerRegistries(ctx context.Context) ([]DockerRegistry, error) {
	var out []DockerRegistry
	if _, err := c.do(ctx, c.api(http.MethodGet, "/docker-registry"), &out); err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateDockerRegistry sends PATCH /docker-registry/{id} (needs write:registries).
// Repeating it has the same effect, so it is retried like an idempotent call.
func (c *Client) UpdateDockerRegistry(ctx context.Context, id string, req UpdateDockerRegistryRequest) (*DockerRegistry, error) {
	return patch[DockerRegistry](ctx, c, req, "/docker-registry/%s", esc(id))
}

// DeleteDockerRegistry sends DELETE /docker-registry/{id} (needs delete:registries).
func (c *Client) DeleteDockerRegistry(ctx context.Context, id string) error {
	return c.remove(ctx, "/docker-registry/%s", esc(id))
}
