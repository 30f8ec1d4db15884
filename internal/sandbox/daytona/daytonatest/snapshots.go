package daytonatest

import (
	"encoding/base64"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

type snap struct {
	ID, Name, ImageName, Dockerfile string
	Region                          string // the region id it lives in (regions.go)
	State, ErrorReason              string
	CPU, Mem, Disk                  int64
	CreatedAt, UpdatedAt, LastUsed  time.Time
	phaseStart, removeAt            time.Time
	fail                            *failure
	log                             string
	// delay overrides the server's build delay for this snapshot (DelayNextBuild).
	delay time.Duration
	// inputs is the whole create request (buildinputs.go).
	inputs *buildInputs
}

type failure struct{ reason, log string }

// FailNextBuild makes the next created snapshot end in build_failed (or error, for an image
// pull) with errorReason reason; log is appended to its build log.
func (s *Server) FailNextBuild(reason, log string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext = &failure{reason: reason, log: log}
}

// FailNextSandbox makes the next created sandbox fail to start with reason as its
// errorReason, as a create that fails on a runner within the server's wait: POST /sandbox
// answers 400 "Sandbox failed to start: <reason>" with no sandbox in the body, and the
// sandbox stays, in state error, under its name (so a retry with the name gets 409) until
// it is deleted. This follows waitForSandboxStarted in Daytona v0.190's
// apps/api/src/sandbox/controllers/sandbox.controller.ts.
func (s *Server) FailNextSandbox(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failSandbox = reason
}

// DelayNextBuild makes the next created snapshot take d from pending to its end state
// instead of the server's build delay: a slow build past a caller's timeout.
func (s *Server) DelayNextBuild(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delayNext = d
}

// SnapshotNames lists the snapshots that exist (any state), in creation order.
func (s *Server) SnapshotNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceSnaps()
	names := make([]string, 0, len(s.snaps))
	for _, sn := range s.snaps {
		names = append(names, sn.Name)
	}
	return names
}

// DeleteSnapshot removes the snapshot named (or with id) name out of band. It reports
// whether it existed.
func (s *Server) DeleteSnapshot(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, sn := range s.snaps {
		if sn.Name == name || sn.ID == name {
			s.snaps = append(s.snaps[:i], s.snaps[i+1:]...)
			return true
		}
	}
	return false
}

// DeactivateSnapshot makes the snapshot inactive out of band (as the idle cron would).
func (s *Server) DeactivateSnapshot(name string) bool {
	return s.SetSnapshotState(name, "inactive")
}

// SnapshotState returns the snapshot's current state ("" if it does not exist).
func (s *Server) SnapshotState(name string) string {
	var state string
	s.onSnap(name, func(sn *snap) { state = sn.State })
	return state
}

// SnapshotDockerfile returns the Dockerfile a snapshot was created with.
func (s *Server) SnapshotDockerfile(name string) string {
	var dockerfile string
	s.onSnap(name, func(sn *snap) { dockerfile = sn.Dockerfile })
	return dockerfile
}

// onSnap calls f, with mu held, on the snapshot named (or with id) name, and reports
// whether there is one: the lookup of the out-of-band accessors tests use.
func (s *Server) onSnap(name string, f func(*snap)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := s.findSnap(name)
	if sn != nil {
		f(sn)
	}
	return sn != nil
}

// advanceSnaps applies the time-driven transitions. Called with mu held.
func (s *Server) advanceSnaps() {
	now := time.Now().UTC()
	kept := s.snaps[:0]
	for _, sn := range s.snaps {
		switch sn.State {
		case "pending", "building", "pulling":
			el := now.Sub(sn.phaseStart)
			delay := s.cfg.buildDelay
			if sn.delay > 0 {
				delay = sn.delay
			}
			switch {
			case el >= delay:
				if sn.fail != nil {
					sn.State, sn.ErrorReason = "build_failed", sn.fail.reason
					if sn.Dockerfile == "" {
						sn.State = "error"
					}
					sn.log += sn.fail.log + "\nERROR: " + sn.fail.reason + "\n"
				} else {
					sn.State, sn.LastUsed = "active", now
					sn.log += "#3 exporting to image done\n"
				}
				sn.UpdatedAt = now
			case el >= delay/2 && sn.State == "pending":
				sn.State = "pulling"
				if sn.Dockerfile != "" {
					sn.State = "building"
				}
				sn.UpdatedAt = now
			}
		case "active":
			if s.cfg.idle > 0 && now.Sub(sn.LastUsed) >= s.cfg.idle {
				sn.State, sn.UpdatedAt = "inactive", now
			}
		case "removing":
			if !now.Before(sn.removeAt) {
				continue
			}
		}
		kept = append(kept, sn)
	}
	s.snaps = kept
}

// findSnap finds by id or name after advancing. Called with mu held.
func (s *Server) findSnap(idOrName string) *snap {
	s.advanceSnaps()
	return first(s.snaps, func(sn *snap) bool { return sn.ID == idOrName || sn.Name == idOrName })
}

func (sn *snap) dto() map[string]any {
	d := map[string]any{
		"id": sn.ID, "organizationId": "org-test", "general": false, "name": sn.Name,
		"state": sn.State, "size": nil, "entrypoint": nil, "cpu": sn.CPU, "gpu": 0, "mem": sn.Mem,
		"disk": sn.Disk, "errorReason": nil, "createdAt": sn.CreatedAt, "updatedAt": sn.UpdatedAt,
		"lastUsedAt": sn.LastUsed, "regionIds": []string{sn.Region}, "sandboxClass": "container",
	}
	if sn.ErrorReason != "" {
		d["errorReason"] = sn.ErrorReason
	}
	if sn.ImageName != "" {
		d["imageName"] = sn.ImageName
	}
	if sn.Dockerfile != "" {
		d["buildInfo"] = map[string]any{"dockerfileContent": sn.Dockerfile, "contextHashes": []string{},
			"createdAt": sn.CreatedAt, "updatedAt": sn.CreatedAt}
	}
	sn.inputs.addTo(d)
	return d
}

var (
	snapNameRE = regexp.MustCompile(`^[a-zA-Z0-9_.\-:]+(\/[a-zA-Z0-9_.\-:]+)*(@sha256:[a-f0-9]{64})?$`)
	b64RunRE   = regexp.MustCompile(`echo ([A-Za-z0-9+/=]+) \| base64 -d`)
)

// hasMarker looks for m in the Dockerfile and in base64 payloads inside it.
func hasMarker(dockerfile, m string) bool {
	if m == "" {
		return false
	}
	if strings.Contains(dockerfile, m) {
		return true
	}
	for _, sub := range b64RunRE.FindAllStringSubmatch(dockerfile, -1) {
		if b, err := base64.StdEncoding.DecodeString(sub[1]); err == nil && strings.Contains(string(b), m) {
			return true
		}
	}
	return false
}

func validImage(img string) bool {
	if strings.Contains(img, "@sha256:") {
		return true
	}
	i := strings.LastIndexByte(img, ':')
	if i < 0 || i < strings.LastIndexByte(img, '/') {
		return false
	}
	switch img[i+1:] {
	case "latest", "lts", "stable", "":
		return false
	}
	return true
}

func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	in, ok := s.readBuildInputs(w, r) // buildinputs.go
	if !ok {
		return
	}
	// CreateSnapshotDto (v0.190 apps/api/src/sandbox/dto/create-snapshot.dto.ts:69-73,
	// 92-96): gpu is @Max(1) and gpuType @ArrayMaxSize(1), class-validator's messages.
	switch {
	case in.GPU > 1:
		writeErr(w, r, http.StatusBadRequest, "gpu must not be greater than 1")
		return
	case len(in.GPUType) > 1:
		writeErr(w, r, http.StatusBadRequest, "gpuType must contain no more than 1 elements")
		return
	}
	var b struct {
		Name      string `json:"name"`
		ImageName string `json:"imageName"`
		BuildInfo *struct {
			DockerfileContent string `json:"dockerfileContent"`
		} `json:"buildInfo"`
		Entrypoint        []string `json:"entrypoint"`
		CPU, Memory, Disk int64
		RegionID          string `json:"regionId"`
	}
	if !decode(w, r, &b) {
		return
	}
	region, known := s.snapshotRegion(b.RegionID)
	// Checks as v0.190 snapshot.service.ts createFromPull/createFromBuildInfo make them
	// (getValidatedOrDefaultRegion :912-930, the name and image checks :107 and :123, the
	// duplicate :261 and :411, whose text there adds quotes and "for this organization").
	switch {
	case !known:
		writeErr(w, r, 404, "Region not found")
		return
	case b.Name == "" || !snapNameRE.MatchString(b.Name):
		writeErr(w, r, 400, "Invalid snapshot name")
		return
	case b.BuildInfo != nil && (b.ImageName != "" || len(b.Entrypoint) > 0):
		writeErr(w, r, 400, "Build info cannot be combined with an image name or entrypoint")
		return
	case b.BuildInfo == nil && b.ImageName == "":
		writeErr(w, r, 400, "Must specify either an image name or build info")
		return
	case b.BuildInfo != nil && strings.TrimSpace(b.BuildInfo.DockerfileContent) == "":
		writeErr(w, r, 400, "dockerfileContent must not be empty")
		return
	case b.ImageName != "" && !validImage(b.ImageName):
		writeErr(w, r, 400, "Image "+b.ImageName+" must include a tag or digest, and :latest is not allowed")
		return
	}
	if s.findSnap(b.Name) != nil {
		writeErr(w, r, 409, "Snapshot with name "+b.Name+" already exists")
		return
	}
	now := time.Now().UTC()
	sn := &snap{ID: newUUID(), Name: b.Name, ImageName: b.ImageName, State: "pending",
		CPU: orDefault(b.CPU, 1), Mem: orDefault(b.Memory, 1), Disk: orDefault(b.Disk, 3),
		CreatedAt: now, UpdatedAt: now, LastUsed: now, phaseStart: now, Region: region.ID}
	if b.BuildInfo != nil {
		sn.Dockerfile = b.BuildInfo.DockerfileContent
		sn.log = "#1 [internal] load build definition from Dockerfile\n#2 " +
			strings.SplitN(sn.Dockerfile, "\n", 2)[0] + "\n"
	} else {
		sn.log = "pulling " + b.ImageName + "\n"
	}
	if s.failNext != nil {
		sn.fail, s.failNext = s.failNext, nil
	} else if hasMarker(sn.Dockerfile, DefaultFailMarker) {
		sn.fail = &failure{reason: "Build failed: the build script exited with code 1", log: "+ " + DefaultFailMarker + "\nexit status 1"}
	}
	sn.delay, s.delayNext = s.delayNext, 0
	if !s.applyBuildInputs(w, r, sn, in) {
		return
	}
	s.snaps = append(s.snaps, sn)
	writeJSON(w, 200, sn.dto())
}

func orDefault(v, d int64) int64 {
	if v > 0 {
		return v
	}
	return d
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	getByID(w, r, s.findSnap, "Snapshot %s not found")
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	pg, limit := 1, 100
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeErr(w, r, 400, "page must be >= 1")
			return
		}
		pg = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			writeErr(w, r, 400, "limit must be between 1 and 200")
			return
		}
		limit = n
	}
	s.advanceSnaps()
	var items []map[string]any
	var matched []*snap
	for _, sn := range s.snaps {
		if strings.Contains(strings.ToLower(sn.Name), strings.ToLower(q.Get("name"))) {
			matched = append(matched, sn)
		}
	}
	if q.Get("sort") == "name" {
		sort.SliceStable(matched, func(i, j int) bool { return matched[i].Name < matched[j].Name })
		if q.Get("order") == "desc" {
			for i, j := 0, len(matched)-1; i < j; i, j = i+1, j-1 {
				matched[i], matched[j] = matched[j], matched[i]
			}
		}
	}
	start := min((pg-1)*limit, len(matched))
	for _, sn := range matched[start:min(start+limit, len(matched))] {
		items = append(items, sn.dto())
	}
	if items == nil {
		items = []map[string]any{}
	}
	writeJSON(w, 200, map[string]any{"items": items, "total": len(matched), "page": pg,
		"totalPages": (len(matched) + limit - 1) / limit})
}

// uuidSnap resolves a UUID-only path parameter, answering the errors itself.
func (s *Server) uuidSnap(w http.ResponseWriter, r *http.Request) *snap {
	id := r.PathValue("id")
	if !isUUID(id) {
		writeErr(w, r, 400, "Validation failed (uuid is expected)")
		return nil
	}
	sn := s.findSnap(id)
	if sn == nil {
		writeErr(w, r, 404, "Snapshot "+id+" not found")
	}
	return sn
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	sn := s.uuidSnap(w, r)
	if sn == nil {
		return
	}
	sn.State, sn.removeAt = "removing", time.Now().Add(s.cfg.removal)
	s.advanceSnaps()
	w.WriteHeader(200)
}

func (s *Server) activateSnapshot(w http.ResponseWriter, r *http.Request) {
	sn := s.uuidSnap(w, r)
	if sn == nil {
		return
	}
	// v0.190 snapshot.service.ts activateSnapshot :746-759 (the texts there name the
	// snapshot: "Snapshot <id> is already active", "... cannot be activated - it is in
	// <state> state").
	switch sn.State {
	case "active":
		writeErr(w, r, 400, "Snapshot is already active")
		return
	case "inactive":
	default:
		writeErr(w, r, 400, "Snapshot is not in inactive state")
		return
	}
	if s.activationRefused(sn) { // snapshotstates.go
		writeErr(w, r, 400, "Snapshot deactivation is still in progress. Please try again in a few minutes.")
		return
	}
	now := time.Now().UTC()
	sn.State, sn.phaseStart, sn.UpdatedAt, sn.fail = "pending", now, now, nil
	writeJSON(w, 200, sn.dto())
}

func (s *Server) deactivateSnapshot(w http.ResponseWriter, r *http.Request) {
	sn := s.uuidSnap(w, r)
	if sn == nil {
		return
	}
	sn.State, sn.UpdatedAt = "inactive", time.Now().UTC()
	w.WriteHeader(204)
}

func (s *Server) buildLogsURL(w http.ResponseWriter, r *http.Request) {
	sn := byID(w, r, s.findSnap, "Snapshot %s not found")
	if sn == nil {
		return
	}
	if s.buildLogsURLRefused(w, r, sn) { // snapshotstates.go
		return
	}
	writeJSON(w, 200, map[string]string{"url": s.ts.URL + "/api/snapshots/" + sn.ID + "/build-logs"})
}

func (s *Server) buildLogs(w http.ResponseWriter, r *http.Request) {
	sn := byID(w, r, s.findSnap, "Snapshot %s not found")
	if sn == nil {
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte(sn.log))
}
