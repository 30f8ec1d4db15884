package daytonatest

import (
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

type sbox struct {
	ID, Name, User, Snapshot          string
	Env, Labels                       map[string]string
	NetworkBlockAll                   bool
	NetworkAllowList, DomainAllowList string
	Target                            string
	CPU, Mem, Disk                    int64
	State, DesiredState               string
	errorReason                       string
	AutoStop, AutoArchive, AutoDelete int
	Secrets                           []map[string]string
	CreatedAt, UpdatedAt              time.Time
	transitionEnd                     time.Time
	toolbox                           string
	// runAs is the user the sandbox's commands and file calls run as, and wsOwner the
	// owner of its /workspace ("" for none), from its snapshot (sandboxUser, workspace.go).
	runAs, wsOwner string
	mounts         []sandboxVolume // its volumes (recordSandboxVolumes, volumes.go)
	// secretEnv is each secret variable's placeholder as fixed at the sandbox's last start,
	// startedWithSecrets whether it then had any (secretenv.go).
	secretEnv          map[string]string
	startedWithSecrets bool
}

// transitional states and where they lead. "creating" is a new sandbox's, only with
// WithTransitionDelay("creating", d) (slowCreate); "destroying" a deleted one's
// (softDelete, softdelete.go).
var transitions = map[string]string{
	"starting": "started", "restoring": "started", "stopping": "stopped", "archiving": "archived",
	"creating": "started", "destroying": "destroyed",
}

// advance completes a due transition. Called with mu held. A sandbox that finishes
// destroying is gone (softdelete.go). An ephemeral sandbox (autoDeleteInterval 0) that
// finishes stopping is destroyed: stop() in Daytona v0.190's
// apps/api/src/sandbox/services/sandbox.service.ts soft-deletes it (isEphemeral), renaming
// it DESTROYED_<name>_<ms> at once, and GET /sandbox/{id} answers 404 once it is destroyed.
func (s *Server) advance(sb *sbox) {
	to, ok := transitions[sb.State]
	if !ok || s.now().Before(sb.transitionEnd) {
		return
	}
	sb.State, sb.UpdatedAt = to, s.now()
	if to == "started" {
		s.fixSecretEnv(sb) // secretenv.go
	}
	if to == "destroyed" || (to == "stopped" && sb.DesiredState == "destroyed") {
		sb.State = "destroyed"
		s.destroy(sb)
	}
}

// destroy removes a sandbox and its local box. Called with mu held.
func (s *Server) destroy(sb *sbox) {
	s.endSessions(sb.ID, false)
	if s.bx != nil {
		_ = s.bx.remove(sb.ID)
	}
	s.sandboxes = slices.DeleteFunc(s.sandboxes, func(x *sbox) bool { return x == sb })
}

// transitionDelay is how long the transitional state lasts.
func (s *Server) transitionDelay(state string) time.Duration {
	if d, ok := s.cfg.transition[state]; ok {
		return d
	}
	return s.cfg.lifecycle
}

func (s *Server) findSandbox(idOrName string) *sbox {
	s.advanceSandboxes()
	return first(s.sandboxes, func(sb *sbox) bool { return sb.ID == idOrName || sb.Name == idOrName })
}

// advanceSandboxes completes every due transition (over a copy: a destroyed sandbox
// leaves the list). Called with mu held.
func (s *Server) advanceSandboxes() {
	for _, sb := range slices.Clone(s.sandboxes) {
		s.advance(sb)
	}
}

// SandboxState returns a sandbox's state ("" if it does not exist).
func (s *Server) SandboxState(idOrName string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.findSandbox(idOrName); sb != nil {
		return sb.State
	}
	return ""
}

func (sb *sbox) dto() map[string]any {
	env := maps.Clone(sb.Env)
	if env == nil {
		env = map[string]string{}
	}
	labels := maps.Clone(sb.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	return map[string]any{
		"id": sb.ID, "organizationId": "org-test", "name": sb.Name, "user": sb.User,
		"snapshot": sb.Snapshot, "env": env, "labels": labels, "public": false,
		"networkBlockAll": sb.NetworkBlockAll, "networkAllowList": sb.NetworkAllowList,
		"domainAllowList": sb.DomainAllowList, "target": sb.Target, "cpu": sb.CPU, "gpu": 0,
		"memory": sb.Mem, "disk": sb.Disk, "state": sb.State, "desiredState": sb.DesiredState,
		"autoStopInterval": sb.AutoStop, "autoArchiveInterval": sb.AutoArchive,
		"autoDeleteInterval": sb.AutoDelete, "toolboxProxyUrl": sb.toolbox,
		"createdAt": sb.CreatedAt, "updatedAt": sb.UpdatedAt, "sandboxClass": "container",
		"errorReason": sb.errorReason, "volumes": sb.volumesDTO(),
	}
}

// domainRE is validateDomainAllowList's pattern (v0.190 apps/api/src/sandbox/utils/
// network-validation.util.ts:49), kept here rather than taken from the client so that the
// two are checked against each other.
var domainRE = regexp.MustCompile(`^(\*\.)?([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]{2,}$`)

// checkList, checkCIDR and checkDomain follow v0.190
// apps/api/src/sandbox/utils/network-validation.util.ts: at most 10 entries (:35-36, :59-60),
// a CIDR needs its prefix length (:25), a domain must be a valid name (:55). The texts
// differ in detail ("Network allow list cannot contain more than 10 networks" there).
func checkList(list string, ok func(string) string) string {
	if strings.TrimSpace(list) == "" {
		return ""
	}
	parts := strings.Split(list, ",")
	if len(parts) > 10 {
		return "At most 10 entries are allowed"
	}
	for _, p := range parts {
		if msg := ok(strings.TrimSpace(p)); msg != "" {
			return msg
		}
	}
	return ""
}

func checkCIDR(p string) string {
	if !strings.Contains(p, "/") {
		return `Invalid network format: "` + p + `". Missing CIDR prefix length`
	}
	ip, _, err := net.ParseCIDR(p)
	if err != nil || ip.To4() == nil {
		return `Invalid network format: "` + p + `"`
	}
	return ""
}

func checkDomain(p string) string {
	if !domainRE.MatchString(p) {
		return `Invalid domain: "` + p + `". Must be a valid domain name` // network-validation.util.ts:55
	}
	return ""
}

// createSandboxBody is the CreateSandbox schema of the v0.205 OpenAPI document (daytona/
// clients api-client-go/api/openapi.yaml, CreateSandbox), whole. decodeStrict refuses any
// other property, which Daytona does not (it ignores them: apps/api/src/main.ts:72-76,
// v0.190), so that a field our client invents fails a test instead of being dropped.
type createSandboxBody struct {
	Name                string              `json:"name"`
	Snapshot            string              `json:"snapshot"`
	User                string              `json:"user"`
	Env                 map[string]string   `json:"env"`
	Labels              map[string]string   `json:"labels"`
	Public              bool                `json:"public"`
	Target              string              `json:"target"`
	CPU                 int64               `json:"cpu"`
	GPU                 int64               `json:"gpu"`
	GPUType             []string            `json:"gpuType"`
	Memory              int64               `json:"memory"`
	Disk                int64               `json:"disk"`
	AutoStopInterval    *int                `json:"autoStopInterval"`
	AutoArchiveInterval *int                `json:"autoArchiveInterval"`
	AutoDeleteInterval  *int                `json:"autoDeleteInterval"`
	AutoPauseInterval   *int                `json:"autoPauseInterval"`
	TTLMinutes          *int                `json:"ttlMinutes"`
	Volumes             []sandboxVolume     `json:"volumes"`
	BuildInfo           json.RawMessage     `json:"buildInfo"`
	NetworkBlockAll     bool                `json:"networkBlockAll"`
	NetworkAllowList    string              `json:"networkAllowList"`
	DomainAllowList     string              `json:"domainAllowList"`
	OutboundProxyURL    string              `json:"outboundProxyUrl"`
	OtelEndpoint        string              `json:"otelEndpointOverride"`
	LinkedSandbox       string              `json:"linkedSandbox"`
	Secrets             []map[string]string `json:"secrets"`
	Spot                bool                `json:"spot"`
}

// refuseCreate is the status and message a create of b from snapshot sn in region is
// refused with (0 and "" when it is not), checked in the order Daytona checks them.
func (s *Server) refuseCreate(b *createSandboxBody, sn *snap, region Region, known bool) (int, string) {
	switch {
	case !known:
		return 404, "Region not found"
	// Resources with a snapshot: sandbox.controller.ts:296 (v0.190); an unknown snapshot:
	// sandbox.service.ts:495; the region check :505-507; GPU ephemeral :524-526.
	case b.Snapshot != "" && (b.CPU != 0 || b.Memory != 0 || b.Disk != 0 || b.GPU != 0):
		return 400, "Cannot specify Sandbox resources when using a snapshot"
	case b.Snapshot == "":
		return 400, "daytonatest: a snapshot is required"
	case sn == nil:
		return 400, "Snapshot " + b.Snapshot + " not found. Did you add it through the Daytona Dashboard?"
	case sn.Region != region.ID:
		// createFromSnapshot in v0.190's apps/api/src/sandbox/services/sandbox.service.ts
		// (isAvailableInRegion), checked before the snapshot's state.
		return 400, "Snapshot " + b.Snapshot + " is not available in region " + region.ID
	case sn.State != "active":
		return 400, "Snapshot " + b.Snapshot + " is " + sn.State
	case b.AutoStopInterval != nil && *b.AutoStopInterval < 0:
		return 400, "autoStopInterval must be >= 0"
	case sn.inputs != nil && sn.inputs.GPU > 0 && (b.AutoDeleteInterval == nil || *b.AutoDeleteInterval != 0):
		// GPU sandboxes must be ephemeral (CreateSandbox in the v0.205 OpenAPI document;
		// /work/shared/reference/daytona-api.md §5).
		return 400, "GPU sandboxes must be ephemeral: set autoDeleteInterval to 0"
	}
	if msg := checkList(b.NetworkAllowList, checkCIDR); msg != "" {
		return 400, msg
	}
	if msg := checkList(b.DomainAllowList, checkDomain); msg != "" {
		return 400, msg
	}
	for _, m := range b.Secrets {
		for _, name := range m {
			if s.secretByName(name) == nil {
				return 400, "Secret " + name + " not found"
			}
		}
	}
	return 0, ""
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var b createSandboxBody
	if !decodeStrict(w, r, &b) {
		return
	}
	sn := s.findSnap(b.Snapshot)
	region, known := s.sandboxRegion(b.Target)
	if status, msg := s.refuseCreate(&b, sn, region, known); status != 0 {
		writeErr(w, r, status, msg)
		return
	}
	vols, status, msg := s.checkSandboxVolumes(b.Volumes) // volumes.go: 404 or 400
	if msg != "" {
		writeErr(w, r, status, msg)
		return
	}
	id := newUUID()
	if b.Name == "" {
		b.Name = id
	}
	if s.findSandbox(b.Name) != nil {
		writeErr(w, r, 409, "Sandbox with name "+b.Name+" already exists")
		return
	}
	bx, err := s.sandboxBox()
	if err == nil {
		err = s.createBox(bx, id, b.NetworkBlockAll, vols) // volumes_box_linux.go
	}
	if err == nil {
		err = s.provision(bx, id, sn) // buildinputs.go
	}
	if err != nil {
		writeErr(w, r, 500, "daytonatest: creating the sandbox: "+err.Error())
		return
	}
	now := s.now()
	sn.LastUsed = now
	sb := &sbox{ID: id, Name: b.Name, User: b.User, Snapshot: sn.Name, Env: b.Env, Labels: b.Labels,
		NetworkBlockAll: b.NetworkBlockAll, NetworkAllowList: b.NetworkAllowList, DomainAllowList: b.DomainAllowList,
		Target: region.ID, CPU: sn.CPU, Mem: sn.Mem, Disk: sn.Disk, State: "started", DesiredState: "started",
		AutoStop: deref(b.AutoStopInterval, 15), AutoArchive: deref(b.AutoArchiveInterval, 10080),
		AutoDelete: deref(b.AutoDeleteInterval, -1), Secrets: b.Secrets, CreatedAt: now, UpdatedAt: now,
		toolbox: s.ts.URL + "/toolbox"}
	sb.runAs, sb.wsOwner = s.sandboxUser(sn)
	s.fixSecretEnv(sb) // secretenv.go
	if sb.User == "" {
		sb.User = "daytona"
	}
	// resolveAutoArchiveInterval (sandbox.service.ts:3298-3309): 0 is the maximum,
	// maxAutoArchiveInterval 43200 (apps/api/src/config/configuration.ts:97).
	if sb.AutoArchive == 0 || sb.AutoArchive > 43200 {
		sb.AutoArchive = 43200
	}
	s.sandboxes = append(s.sandboxes, sb)
	s.recordSandboxVolumes(id, vols)
	if s.failSandbox != "" {
		// The controller's waitForSandboxStarted rejects with a 400 and no sandbox; the
		// errored sandbox keeps its name (FailNextSandbox).
		sb.State, sb.errorReason, s.failSandbox = "error", s.failSandbox, ""
		// sandbox.controller.ts:1532-1550.
		writeErr(w, r, 400, "Sandbox failed to start: "+sb.errorReason)
		return
	}
	if s.slowCreate(w, sb) {
		return
	}
	writeJSON(w, 200, sb.dto())
}

// slowCreate answers a create as Daytona does when the sandbox has not started within the
// controller's wait, if WithTransitionDelay("creating", d) made creates slow: the sandbox
// stays creating for d, and the answer is the DTO createFromSnapshot returned before the
// wait, whose state is the entity's default, unknown (v0.190 apps/api/src/sandbox/
// controllers/sandbox.controller.ts:303-311 does not reassign waitForSandboxStarted's
// result; entities/sandbox.entity.ts:93-98). The emulator answers at once rather than
// after Daytona's 30 s. Called with mu held.
func (s *Server) slowCreate(w http.ResponseWriter, sb *sbox) bool {
	d := s.cfg.transition["creating"]
	if d <= 0 {
		return false
	}
	sb.State, sb.transitionEnd = "creating", s.now().Add(d)
	dto := sb.dto()
	dto["state"] = "unknown"
	writeJSON(w, 200, dto)
	return true
}

func deref(p *int, d int) int {
	if p == nil {
		return d
	}
	return *p
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	sb := s.sandboxOr404(w, r)
	if sb == nil {
		return
	}
	writeJSON(w, 200, sb.dto())
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	offset, limit, ok := page(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	var want map[string]string
	if v := q.Get("labels"); v != "" {
		if err := json.Unmarshal([]byte(v), &want); err != nil {
			writeErr(w, r, 400, "labels must be a JSON object")
			return
		}
	}
	states := q["states[]"]
	var matched []map[string]any
	s.advanceSandboxes()
	for _, sb := range s.sandboxes {
		if !strings.HasPrefix(strings.ToLower(sb.Name), strings.ToLower(q.Get("name"))) {
			continue
		}
		if len(states) > 0 && !slices.Contains(states, sb.State) {
			continue
		}
		match := true
		for k, v := range want {
			if sb.Labels[k] != v {
				match = false
			}
		}
		if match {
			matched = append(matched, sb.listedSandbox()) // softdelete.go
		}
	}
	items, next := cursorPage(matched, offset, limit)
	if items == nil {
		items = []map[string]any{}
	}
	writeJSON(w, 200, map[string]any{"items": items, "nextCursor": next})
}

// lifecycle applies a transition from the allowed states, answering 409 during another
// transition and 400 from other states.
func (s *Server) lifecycle(w http.ResponseWriter, r *http.Request, from map[string]string, noop, badMsg string, act func(box, string) error) {
	sb := s.sandboxOr404(w, r)
	if sb == nil {
		return
	}
	if sb.State == "error" || sb.State == "build_failed" {
		// assertSandboxNotErrored (v0.190 apps/api/src/sandbox/services/sandbox.service.ts:164-168).
		writeErr(w, r, 400, "Sandbox is in an errored state")
		return
	}
	// state != desiredState is StateChangeInProgressError, 409
	// (apps/api/src/exceptions/state-change-in-progress.exception.ts:9), in start
	// (sandbox.service.ts:2064-2072), stop (:2156-2158) and archive (:360-362).
	if _, busy := transitions[sb.State]; busy {
		writeErr(w, r, 409, "Sandbox state change in progress")
		return
	}
	if sb.State == noop {
		writeJSON(w, 200, sb.dto())
		return
	}
	via, ok := from[sb.State]
	if !ok {
		writeErr(w, r, 400, badMsg)
		return
	}
	if sb.State == "started" {
		// The daemon does not outlive a stop: its sessions and their commands end.
		s.endSessions(sb.ID, false)
	}
	if act != nil && s.bx != nil {
		if err := act(s.bx, sb.ID); err != nil {
			writeErr(w, r, 500, "daytonatest: "+err.Error())
			return
		}
	}
	sb.State, sb.DesiredState = via, transitions[via]
	if via == "stopping" && sb.AutoDelete == 0 {
		sb.DesiredState, sb.Name = "destroyed", softDeleteName(sb.Name, s.now())
	}
	sb.transitionEnd, sb.UpdatedAt = s.now().Add(s.transitionDelay(via)), s.now()
	dto := sb.dto()
	s.advance(sb)
	if sb.State != "destroyed" {
		dto = sb.dto()
	}
	writeJSON(w, 200, dto)
}

// startSandbox: start of a started sandbox returns it (sandbox.service.ts:2055-2057); only
// stopped and archived ones start, else 400 "Sandbox is not in valid state" (:2074-2080).
func (s *Server) startSandbox(w http.ResponseWriter, r *http.Request) {
	s.lifecycle(w, r, map[string]string{"stopped": "starting", "archived": "restoring"}, "started", "Sandbox is not in valid state", box.start)
}

// stopSandbox: only a started sandbox stops, else 400 "Sandbox is not in a stoppable
// state" (sandbox.service.ts:2160-2162); an ephemeral one is soft-deleted (:2168-2170,
// sandbox.entity.ts:311 DESTROYED_<name>_<ms>).
func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request) {
	s.lifecycle(w, r, map[string]string{"started": "stopping"}, "", "Sandbox is not in a stoppable state", box.stop)
}

// archiveSandbox is archive() of v0.190's apps/api/src/sandbox/services/
// sandbox.service.ts:355-374: errored 400, a transition 409, any state but stopped 400
// "Sandbox is not stopped". Its "Ephemeral sandboxes cannot be archived" (372-374) is not
// modelled: the emulator's ephemeral sandboxes are destroyed as they stop and are never
// stopped.
func (s *Server) archiveSandbox(w http.ResponseWriter, r *http.Request) {
	s.lifecycle(w, r, map[string]string{"stopped": "archiving"}, "", "Sandbox is not stopped", nil)
}

func (s *Server) putSandboxSecrets(w http.ResponseWriter, r *http.Request) {
	sb := s.sandboxOr404(w, r)
	if sb == nil {
		return
	}
	var b struct {
		Secrets []map[string]string `json:"secrets"`
	}
	if !decode(w, r, &b) {
		return
	}
	if b.Secrets == nil {
		writeErr(w, r, 400, "secrets must be an array")
		return
	}
	for _, m := range b.Secrets {
		for _, name := range m {
			if s.secretByName(name) == nil {
				writeErr(w, r, 400, "Secret "+name+" not found")
				return
			}
		}
	}
	sb.Secrets = b.Secrets
	s.secretsAttached(sb) // secretenv.go
	writeJSON(w, 200, sb.dto())
}

func (s *Server) networkSettings(w http.ResponseWriter, r *http.Request) {
	sb := s.sandboxOr404(w, r)
	if sb == nil {
		return
	}
	var b struct {
		NetworkBlockAll                   *bool
		NetworkAllowList, DomainAllowList *string
	}
	if !decode(w, r, &b) {
		return
	}
	if b.NetworkAllowList != nil {
		if msg := checkList(*b.NetworkAllowList, checkCIDR); msg != "" {
			writeErr(w, r, 400, msg)
			return
		}
		sb.NetworkAllowList, sb.NetworkBlockAll = *b.NetworkAllowList, false
	}
	if b.DomainAllowList != nil {
		if msg := checkList(*b.DomainAllowList, checkDomain); msg != "" {
			writeErr(w, r, 400, msg)
			return
		}
		sb.DomainAllowList = *b.DomainAllowList
	}
	if b.NetworkBlockAll != nil {
		sb.NetworkBlockAll = *b.NetworkBlockAll
		if *b.NetworkBlockAll || b.NetworkAllowList == nil {
			sb.NetworkAllowList = ""
		}
	}
	writeJSON(w, 200, sb.dto())
}

// sandboxOr404 finds the sandbox named by the {id} path value, or answers 404 as the
// API does and returns nil.
func (s *Server) sandboxOr404(w http.ResponseWriter, r *http.Request) *sbox {
	return byID(w, r, s.findSandbox, "Sandbox with ID or name %s not found")
}
