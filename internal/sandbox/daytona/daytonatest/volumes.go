package daytonatest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Volumes, as apps/api/src/sandbox/services/volume.service.ts (v0.190) and the OpenAPI
// document (VolumeDto, VolumeState) describe them: a new volume is pending_create until
// volumeReadyAfter has passed, then ready; a duplicate name is a 400; delete works from
// ready or error only, answers 409 naming a sandbox that mounts the volume, and leaves
// the volume pending_delete, then deleted (still readable by id, no longer by name or in
// the list). Sandboxes' mounts are checked as resolveVolumes and
// volume-mount-path-validation.util.ts (sandbox.service.ts) check them: an unknown volume
// is a 404, one not ready a 400 (checkSandboxVolumes).

// volumeReadyAfter is how long a volume stays pending_create, and
// defaultVolumeDeleteDelay how long a deleted one stays pending_delete unless
// WithVolumeDeleteDelay says otherwise. Daytona's volume manager works through pending
// volumes every 5 s (v0.190 apps/api/src/sandbox/managers/volume.manager.ts:108), and
// deletes the bucket on the way, so a real delete takes seconds.
const (
	volumeReadyAfter         = 50 * time.Millisecond
	defaultVolumeDeleteDelay = 50 * time.Millisecond
)

// WithVolumeDeleteDelay sets how long a deleted volume stays pending_delete before it is
// deleted (default 50 ms). Its name stays taken meanwhile, as on Daytona.
func WithVolumeDeleteDelay(d time.Duration) Option {
	return func(c *config) { c.volumeDelete = &d }
}

func (s *Server) volumeDeleteDelay() time.Duration {
	if s.cfg.volumeDelete != nil {
		return *s.cfg.volumeDelete
	}
	return defaultVolumeDeleteDelay
}

// volumesState is the emulator's volumes and docker registries (registries.go).
type volumesState struct {
	volumes    []*volume
	registries []*registry
}

type volume struct {
	ID, Name, State      string
	CreatedAt, UpdatedAt time.Time
	deleteAt             time.Time
}

type sandboxVolume struct {
	VolumeID  string `json:"volumeId"`
	MountPath string `json:"mountPath"`
	Subpath   string `json:"subpath,omitempty"`
}

func (s *Server) volumeRoutes(api func(route, perm string, fn http.HandlerFunc)) {
	api("POST /volumes", "write:volumes", s.createVolume)
	api("GET /volumes", "read:volumes", s.listVolumes)
	api("GET /volumes/{id}", "read:volumes", s.getVolume)
	api("GET /volumes/by-name/{name}", "read:volumes", s.getVolumeByName)
	api("DELETE /volumes/{id}", "delete:volumes", s.deleteVolume)
	s.registryRoutes(api)
}

// advance completes a volume's due transition.
func (v *volume) advance(now time.Time) {
	switch {
	case v.State == "pending_create" && now.Sub(v.CreatedAt) >= volumeReadyAfter:
		v.State, v.UpdatedAt = "ready", now
	case v.State == "pending_delete" && !now.Before(v.deleteAt):
		v.State, v.UpdatedAt = "deleted", now
	}
}

func (v *volume) dto() map[string]any {
	return map[string]any{"id": v.ID, "name": v.Name, "organizationId": "org-test", "state": v.State,
		"createdAt": v.CreatedAt, "updatedAt": v.UpdatedAt, "errorReason": nil}
}

// findVolume returns the volume with this id, or the live one of this name (as
// getVolumesByIdOrName resolves a sandbox's volumeId).
func (s *Server) findVolume(idOrName string, byName bool) *volume {
	now := time.Now().UTC()
	for _, v := range s.vols.volumes {
		v.advance(now)
		if v.ID == idOrName || (byName && v.Name == idOrName && v.State != "deleted") {
			return v
		}
	}
	return nil
}

// VolumeState returns a volume's state by id or name ("" if there is none).
func (s *Server) VolumeState(idOrName string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.findVolume(idOrName, true); v != nil {
		return v.State
	}
	return ""
}

// DeleteVolumeOutOfBand deletes a volume as someone using the dashboard would.
func (s *Server) DeleteVolumeOutOfBand(idOrName string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.findVolume(idOrName, true)
	if v == nil {
		return false
	}
	v.State = "deleted"
	return true
}

// SandboxVolumes returns the volume mounts a sandbox was created with (id or name).
func (s *Server) SandboxVolumes(idOrName string) []map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.findSandbox(idOrName)
	if sb == nil {
		return nil
	}
	var out []map[string]string
	for _, m := range sb.mounts {
		out = append(out, map[string]string{"volumeId": m.VolumeID, "mountPath": m.MountPath, "subpath": m.Subpath})
	}
	return out
}

func (s *Server) createVolume(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Name string `json:"name"`
	}
	if !decodeStrict(w, r, &b) {
		return
	}
	id := newUUID()
	if b.Name == "" {
		b.Name = id // "Set name from DTO or use ID as default"
	}
	if s.findVolume(b.Name, true) != nil {
		// Any volume of that name not yet deleted holds it, pending_delete and deleting
		// included (v0.190 apps/api/src/sandbox/services/volume.service.ts:103-114).
		writeErr(w, r, 400, "Volume with name "+b.Name+" already exists")
		return
	}
	now := time.Now().UTC()
	v := &volume{ID: id, Name: b.Name, State: "pending_create", CreatedAt: now, UpdatedAt: now}
	s.vols.volumes = append(s.vols.volumes, v)
	writeJSON(w, 200, v.dto())
}

func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request) {
	all := r.URL.Query().Get("includeDeleted") == "true"
	out := []map[string]any{}
	now := time.Now().UTC()
	for _, v := range s.vols.volumes {
		v.advance(now)
		if all || v.State != "deleted" {
			out = append(out, v.dto())
		}
	}
	writeJSON(w, 200, out)
}

func (s *Server) getVolume(w http.ResponseWriter, r *http.Request) {
	v := s.findVolume(r.PathValue("id"), false)
	if v == nil {
		writeErr(w, r, 404, "Volume with ID "+r.PathValue("id")+" not found")
		return
	}
	writeJSON(w, 200, v.dto())
}

func (s *Server) getVolumeByName(w http.ResponseWriter, r *http.Request) {
	v := s.findVolume(r.PathValue("name"), true)
	if v == nil || v.Name != r.PathValue("name") {
		writeErr(w, r, 404, "Volume with name "+r.PathValue("name")+" not found")
		return
	}
	writeJSON(w, 200, v.dto())
}

func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request) {
	v := s.findVolume(r.PathValue("id"), false)
	if v == nil {
		writeErr(w, r, 404, "Volume with ID "+r.PathValue("id")+" not found")
		return
	}
	if v.State != "ready" && v.State != "error" { // volume.service.ts:139-142 (v0.190)
		writeErr(w, r, 400, "Volume must be in 'ready' or 'error' state in order to be deleted")
		return
	}
	// 409 while any sandbox whose desiredState is not destroyed mounts the volume: started,
	// stopped, archived and errored ones alike; only a sandbox being destroyed (deleted, or
	// stopping with autoDeleteInterval 0) no longer counts (apps/api/src/sandbox/services/
	// volume.service.ts:145-164, v0.190).
	s.advanceSandboxes()
	for _, sb := range s.sandboxes {
		if sb.DesiredState == "destroyed" {
			continue
		}
		if slices.ContainsFunc(sb.mounts, func(m sandboxVolume) bool { return m.VolumeID == v.ID }) {
			writeErr(w, r, 409, "Volume cannot be deleted because it is in use by one or more sandboxes (e.g. "+sb.Name+")")
			return
		}
	}
	now := time.Now().UTC()
	v.State, v.UpdatedAt, v.deleteAt = "pending_delete", now, now.Add(s.volumeDeleteDelay())
	w.WriteHeader(200)
}

// checkSandboxVolumes resolves a create's volumes (ids or names) to volume ids and
// validates mount paths and subpaths; it returns the refusal's status and message, or 0
// and "". As getVolumesByIdOrName (v0.190 apps/api/src/sandbox/services/
// volume.service.ts:219-281) resolves them: a reference to no volume (or a deleted one)
// is a 404 "Volume 'x' not found" (268-270), one not ready (pending_create,
// pending_delete, error) a 400 "... is not in a ready state" (271-275).
func (s *Server) checkSandboxVolumes(vols []sandboxVolume) ([]sandboxVolume, int, string) {
	var out []sandboxVolume
	var errs []string
	for _, m := range vols {
		v := s.findVolume(m.VolumeID, true)
		if v == nil || v.State == "deleted" {
			return nil, http.StatusNotFound, "Volume '" + m.VolumeID + "' not found"
		}
		if v.State != "ready" {
			return nil, http.StatusBadRequest, "Volume '" + v.Name + "' is not in a ready state. Current state: " + v.State
		}
		m.VolumeID = v.ID
		out = append(out, m)
	}
	for _, m := range out {
		if msg := mountPathError(m.MountPath); msg != "" {
			errs = append(errs, msg)
		}
	}
	if len(errs) > 0 {
		return nil, http.StatusBadRequest, strings.Join(errs, ", ")
	}
	for _, m := range out {
		switch sp := m.Subpath; {
		case sp == "":
		case strings.HasPrefix(sp, "/"):
			errs = append(errs, `Invalid subpath "`+sp+`" (S3 key prefixes cannot start with /)`)
		case strings.Contains(sp, ".."):
			errs = append(errs, `Invalid subpath "`+sp+`" (cannot contain .. for security)`)
		case strings.Contains(sp, "//"):
			errs = append(errs, `Invalid subpath "`+sp+`" (cannot contain consecutive slashes)`)
		}
	}
	if len(errs) > 0 {
		return nil, http.StatusBadRequest, strings.Join(errs, ", ")
	}
	return out, 0, ""
}

var consecutiveSlashes = regexp.MustCompile(`//+`)

// mountPathError is validateMountPaths' message for one mount path, or "" (v0.190
// apps/api/src/sandbox/utils/volume-mount-path-validation.util.ts:13-50; subpaths :57-90).
func mountPathError(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return "Invalid mount path " + p + " (must be absolute)"
	case p == "/" || p == "//":
		return "Invalid mount path " + p + " (cannot mount to the root directory)"
	case strings.Contains(p, "/../") || strings.Contains(p, "/./") || strings.HasSuffix(p, "/..") || strings.HasSuffix(p, "/."):
		return "Invalid mount path " + p + " (cannot contain relative path components)"
	case consecutiveSlashes.MatchString(p[1:]):
		return "Invalid mount path " + p + " (cannot contain consecutive slashes)"
	}
	for _, d := range []string{"/proc", "/sys", "/dev", "/boot", "/etc", "/bin", "/sbin", "/lib", "/lib64"} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return "Invalid mount path " + p + " (cannot mount to system directory)"
		}
	}
	return ""
}

// recordSandboxVolumes keeps a created sandbox's resolved mounts. Daytona stores them
// on the sandbox (sandbox.entity.ts:190-194, default []) and returns them in its DTO
// (sandbox.dto.ts:339, volumesDTO).
func (s *Server) recordSandboxVolumes(sandboxID string, vols []sandboxVolume) {
	for _, sb := range s.sandboxes {
		if sb.ID == sandboxID {
			sb.mounts = vols
		}
	}
}

// volumesDTO is the DTO's volumes: [] for none, as the entity's default.
func (sb *sbox) volumesDTO() []sandboxVolume {
	if sb.mounts == nil {
		return []sandboxVolume{}
	}
	return sb.mounts
}

// decodeStrict decodes a JSON body that may hold only the fields of v, and refuses any
// other with class-validator's forbidNonWhitelisted message, "property X should not
// exist". The emulator is stricter than Daytona here, on purpose: v0.190's global
// ValidationPipe({transform: true}) sets neither whitelist nor forbidNonWhitelisted
// (apps/api/src/main.ts:72-76), so the real API silently ignores an unknown property. The
// refusal is a lint for our own client: a misspelt or invented field would be dropped
// without a word by Daytona, and fails a test here instead.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeErr(w, r, http.StatusBadRequest, "invalid body: "+err.Error())
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		msg := "invalid JSON body: " + err.Error()
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			msg = "property " + strings.Trim(name, `"`) + " should not exist"
		}
		writeErr(w, r, http.StatusBadRequest, msg)
		return false
	}
	return true
}
