package daytonatest

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

type secret struct {
	ID, Name, Description, Placeholder, value string
	Hosts                                     []string
	CreatedAt, UpdatedAt                      time.Time
}

// SecretValue returns a secret's stored value (only tests see it; the API never returns it).
func (s *Server) SecretValue(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sec := s.secretByName(name); sec != nil {
		return sec.value, true
	}
	return "", false
}

// DeleteSecret removes a secret out of band.
func (s *Server) DeleteSecret(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return removeWhere(&s.secrets, func(x *secret) bool { return x.Name == name || x.ID == name })
}

// SetSecretHosts changes a secret's hosts out of band (as someone using the dashboard
// would). It reports whether the secret exists.
func (s *Server) SetSecretHosts(name string, hosts ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sec := s.secretByName(name)
	if sec == nil {
		return false
	}
	sec.Hosts, sec.UpdatedAt = slices.Clone(hosts), time.Now().UTC()
	return true
}

// SetSecretValue rotates a secret's value out of band.
func (s *Server) SetSecretValue(name, value string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sec := s.secretByName(name)
	if sec == nil {
		return false
	}
	sec.value, sec.UpdatedAt = value, time.Now().UTC()
	return true
}

// SecretHosts returns a secret's hosts (nil, false if it does not exist).
func (s *Server) SecretHosts(name string) ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sec := s.secretByName(name); sec != nil {
		return slices.Clone(sec.Hosts), true
	}
	return nil, false
}

func (s *Server) secretByName(name string) *secret {
	for _, sec := range s.secrets {
		if sec.Name == name {
			return sec
		}
	}
	return nil
}

func (s *Server) secretByID(id string) *secret {
	return first(s.secrets, func(sec *secret) bool { return sec.ID == id })
}

func (sec *secret) dto() map[string]any {
	hosts := slices.Clone(sec.Hosts)
	if hosts == nil {
		hosts = []string{}
	}
	d := map[string]any{"id": sec.ID, "name": sec.Name, "placeholder": sec.Placeholder,
		"hosts": hosts, "createdAt": sec.CreatedAt, "updatedAt": sec.UpdatedAt}
	if sec.Description != "" {
		d["description"] = sec.Description
	}
	return d
}

var (
	secretNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]*$`)
	hostRE       = regexp.MustCompile(`^(\*\.)?([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)*[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$`)
)

func checkHosts(hosts []string) string {
	for _, h := range hosts {
		if !hostRE.MatchString(h) {
			return "Invalid host " + `"` + h + `": use a hostname or *.domain, without a port`
		}
	}
	return ""
}

func (s *Server) createSecret(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Name, Value, Description string
		Hosts                    []string
	}
	if !decode(w, r, &b) {
		return
	}
	switch {
	case !secretNameRE.MatchString(b.Name):
		writeErr(w, r, 400, "name must contain only alphanumeric characters, hyphens and underscores")
		return
	case b.Value == "":
		writeErr(w, r, 400, "value should not be empty")
		return
	case s.secretByName(b.Name) != nil:
		writeErr(w, r, 409, "Secret with name "+b.Name+" already exists")
		return
	}
	if msg := checkHosts(b.Hosts); msg != "" {
		writeErr(w, r, 400, msg)
		return
	}
	now := time.Now().UTC()
	id := newUUID()
	sec := &secret{ID: id, Name: b.Name, Description: b.Description, value: b.Value, Hosts: b.Hosts,
		Placeholder: "dtn_secret_" + strings.ReplaceAll(id, "-", ""), CreatedAt: now, UpdatedAt: now}
	s.secrets = append(s.secrets, sec)
	writeJSON(w, 201, sec.dto())
}

func (s *Server) filteredSecrets(r *http.Request) []map[string]any {
	name := strings.ToLower(r.URL.Query().Get("name"))
	out := []map[string]any{}
	for _, sec := range s.secrets {
		if strings.Contains(strings.ToLower(sec.Name), name) {
			out = append(out, sec.dto())
		}
	}
	return out
}

func (s *Server) listAllSecrets(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, s.filteredSecrets(r))
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) {
	offset, limit, ok := page(w, r)
	if !ok {
		return
	}
	all := s.filteredSecrets(r)
	items, next := cursorPage(all, offset, limit)
	writeJSON(w, 200, map[string]any{"items": items, "total": len(all), "nextCursor": next})
}

func (s *Server) getSecret(w http.ResponseWriter, r *http.Request) {
	getByID(w, r, s.secretByID, "Secret %s not found")
}

func (s *Server) patchSecret(w http.ResponseWriter, r *http.Request) {
	patchByID(w, r, s.secretByID, "Secret %s not found", func(sec *secret) bool {
		var b struct {
			Value, Description *string
			Hosts              *[]string
		}
		if !decode(w, r, &b) {
			return false
		}
		if b.Value != nil && *b.Value == "" {
			writeErr(w, r, 400, "value should not be empty")
			return false
		}
		if b.Hosts != nil {
			if msg := checkHosts(*b.Hosts); msg != "" {
				writeErr(w, r, 400, msg)
				return false
			}
			sec.Hosts = *b.Hosts
		}
		setIfSent(&sec.value, b.Value)
		setIfSent(&sec.Description, b.Description)
		sec.UpdatedAt = time.Now().UTC()
		return true
	})
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) {
	deleteByID(w, r, &s.secrets, s.secretByID, "Secret %s not found")
}
