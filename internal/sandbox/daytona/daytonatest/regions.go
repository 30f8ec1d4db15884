package daytonatest

import (
	"net/http"
	"slices"
	"time"
)

// Region is a region of the emulated organization: Daytona knows it by ID; a sandbox's
// target may also give its Name.
type Region struct{ ID, Name string }

// DefaultRegions are the emulator's regions unless WithRegions says otherwise: Daytona's
// shared regions, whose ids are their names. The first is the organization's default.
var DefaultRegions = []Region{{ID: "us", Name: "us"}, {ID: "eu", Name: "eu"}}

// WithRegions sets the organization's regions; the first is its default region (where a
// snapshot without regionId and a sandbox without target go).
func WithRegions(regions ...Region) Option {
	return func(c *config) { c.regions = slices.Clone(regions) }
}

func (s *Server) regions() []Region {
	if len(s.cfg.regions) == 0 {
		return DefaultRegions
	}
	return s.cfg.regions
}

// snapshotRegion resolves CreateSnapshot's regionId as snapshot.service.ts
// (getValidatedOrDefaultRegion, v0.190) does: by id only, "" for the default region.
func (s *Server) snapshotRegion(id string) (Region, bool) {
	rs := s.regions()
	if id == "" {
		return rs[0], true
	}
	i := slices.IndexFunc(rs, func(r Region) bool { return r.ID == id })
	if i < 0 {
		return Region{}, false
	}
	return rs[i], true
}

// sandboxRegion resolves CreateSandbox's target as sandbox.service.ts
// (getValidatedOrDefaultRegion, v0.190) does: by name first, then by id, "" for the
// default region.
func (s *Server) sandboxRegion(target string) (Region, bool) {
	rs := s.regions()
	if target == "" {
		return rs[0], true
	}
	if i := slices.IndexFunc(rs, func(r Region) bool { return r.Name == target }); i >= 0 {
		return rs[i], true
	}
	if i := slices.IndexFunc(rs, func(r Region) bool { return r.ID == target }); i >= 0 {
		return rs[i], true
	}
	return Region{}, false
}

// listRegions is GET /regions (listAvailableRegions in v0.190's
// apps/api/src/organization/controllers/organization-region.controller.ts): RegionDto[].
func (s *Server) listRegions(w http.ResponseWriter, _ *http.Request) {
	now := time.Now().UTC()
	out := make([]map[string]any, 0, len(s.regions()))
	for _, r := range s.regions() {
		out = append(out, map[string]any{"id": r.ID, "name": r.Name, "organizationId": nil,
			"regionType": "shared", "createdAt": now, "updatedAt": now})
	}
	writeJSON(w, http.StatusOK, out)
}
