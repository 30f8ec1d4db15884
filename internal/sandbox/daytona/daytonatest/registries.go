package daytonatest

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/validatorjs"
)

// Docker registries, as apps/api/src/docker-registry (v0.190) and the OpenAPI document
// (CreateDockerRegistry, UpdateDockerRegistry, DockerRegistry) describe them: the
// organization's registries (registryType organization), at most 100; the url must be a
// URL with a top-level domain (@IsUrl(), validatorjs.IsURL) and is stored without trailing
// slashes ("docker.io" for Docker Hub); an update requires name, url and username, keeps
// the password unless one is sent and the project unless the property is sent (an empty
// string clears it); delete answers 204. Passwords are never returned; Registry shows
// them to tests.

type registry struct {
	ID, Name, URL, Username, Project, password string
	CreatedAt, UpdatedAt                       time.Time
}

func (s *Server) registryRoutes(api func(route, perm string, fn http.HandlerFunc)) {
	api("POST /docker-registry", "write:registries", s.createRegistry)
	api("GET /docker-registry", "", s.listRegistries)
	api("GET /docker-registry/{id}", "", s.getRegistry)
	api("PATCH /docker-registry/{id}", "write:registries", s.patchRegistry)
	api("DELETE /docker-registry/{id}", "delete:registries", s.deleteRegistry)
}

func (g *registry) dto() map[string]any {
	return map[string]any{"id": g.ID, "name": g.Name, "url": g.URL, "username": g.Username,
		"project": g.Project, "registryType": "organization", "createdAt": g.CreatedAt, "updatedAt": g.UpdatedAt}
}

// normalizeRegistryURL is docker-registry.service.ts's normalizeRegistryUrl (:44, v0.190).
func normalizeRegistryURL(u string) string {
	if strings.TrimSpace(u) == "" || strings.Contains(strings.ToLower(u), "docker.io") {
		return "docker.io"
	}
	return strings.TrimRight(strings.TrimSpace(u), "/")
}

func (s *Server) registryByID(id string) *registry {
	return first(s.vols.registries, func(g *registry) bool { return g.ID == id })
}

// Registry returns a registry's URL, username and password by name (ok false if none).
func (s *Server) Registry(name string) (url, username, password string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.vols.registries {
		if g.Name == name {
			return g.URL, g.Username, g.password, true
		}
	}
	return "", "", "", false
}

// RegistryProject returns a registry's project by name (ok false if there is none).
func (s *Server) RegistryProject(name string) (project string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.vols.registries {
		if g.Name == name {
			return g.Project, true
		}
	}
	return "", false
}

// DeleteRegistryOutOfBand deletes a registry by name as someone using the dashboard
// would.
func (s *Server) DeleteRegistryOutOfBand(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return removeWhere(&s.vols.registries, func(g *registry) bool { return g.Name == name })
}

// SetRegistryUsername changes a registry's username out of band.
func (s *Server) SetRegistryUsername(name, username string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.vols.registries {
		if g.Name == name {
			g.Username, g.UpdatedAt = username, time.Now().UTC()
			return true
		}
	}
	return false
}

type registryBody struct {
	Name     *string `json:"name"`
	URL      *string `json:"url"`
	Username *string `json:"username"`
	Password *string `json:"password"`
	Project  *string `json:"project"`
}

// missing names the required fields a body lacks, as class-validator's messages do, and
// a url that is not @IsUrl() (validatorjs.IsURL): "url must be a URL address".
func (b registryBody) missing(password bool) string {
	var msgs []string
	for _, f := range []struct {
		name string
		v    *string
	}{{"name", b.Name}, {"url", b.URL}, {"username", b.Username}, {"password", b.Password}} {
		switch {
		case f.name == "password" && !password:
		case f.name == "url" && (f.v == nil || !validatorjs.IsURL(*f.v)):
			msgs = append(msgs, "url must be a URL address")
		case f.v == nil:
			msgs = append(msgs, f.name+" must be a string")
		}
	}
	return strings.Join(msgs, ", ")
}

// decodeRegistry decodes the body of a create (password required) or an update and
// answers 400 when it lacks a required field (missing), reporting whether it did not.
func decodeRegistry(w http.ResponseWriter, r *http.Request, password bool) (registryBody, bool) {
	var b registryBody
	if !decodeStrict(w, r, &b) {
		return b, false
	}
	if msg := b.missing(password); msg != "" {
		writeErr(w, r, 400, msg)
		return b, false
	}
	return b, true
}

// setIfSent applies an optional field of an update's body: the API's update assigns only
// the properties the body has, so an omitted one (nil) leaves the stored value as it is.
func setIfSent[T any](stored *T, sent *T) {
	if sent != nil {
		*stored = *sent
	}
}

func deref0(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *Server) createRegistry(w http.ResponseWriter, r *http.Request) {
	b, ok := decodeRegistry(w, r, true)
	if !ok {
		return
	}
	if len(s.vols.registries) >= 100 { // docker-registry.service.ts:107 (v0.190)
		writeErr(w, r, 400, "You have reached the maximum number of registries")
		return
	}
	now := time.Now().UTC()
	g := &registry{ID: newUUID(), Name: *b.Name, URL: normalizeRegistryURL(*b.URL), Username: *b.Username,
		password: *b.Password, Project: deref0(b.Project), CreatedAt: now, UpdatedAt: now}
	s.vols.registries = append(s.vols.registries, g)
	writeJSON(w, 201, g.dto())
}

func (s *Server) listRegistries(w http.ResponseWriter, r *http.Request) {
	out := []map[string]any{}
	for _, g := range slices.Backward(s.vols.registries) { // createdAt DESC
		out = append(out, g.dto())
	}
	writeJSON(w, 200, out)
}

func (s *Server) getRegistry(w http.ResponseWriter, r *http.Request) {
	getByID(w, r, s.registryByID, "Docker registry with ID %s not found")
}

func (s *Server) patchRegistry(w http.ResponseWriter, r *http.Request) {
	patchByID(w, r, s.registryByID, "Docker registry with ID %s not found", func(g *registry) bool {
		b, ok := decodeRegistry(w, r, false)
		if !ok {
			return false
		}
		g.Name, g.URL, g.Username = *b.Name, normalizeRegistryURL(*b.URL), *b.Username
		if b.Password != nil && *b.Password != "" {
			g.password = *b.Password
		}
		// update() assigns registry.project = updateDto.project and saves: TypeORM's save
		// skips an undefined property, so an omitted project stays as it was and "" clears it
		// (apps/api/src/docker-registry/services/docker-registry.service.ts:151-159, v0.190).
		setIfSent(&g.Project, b.Project)
		g.UpdatedAt = time.Now().UTC()
		return true
	})
}

func (s *Server) deleteRegistry(w http.ResponseWriter, r *http.Request) {
	deleteByID(w, r, &s.vols.registries, s.registryByID, "Docker registry with ID %s not found")
}
