package daytona

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Region is a RegionDto of GET /regions: a region available to the organization.
type Region struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	RegionType string `json:"regionType,omitempty"`
}

// Regions lists the regions available to the organization (GET /regions; membership
// only, no permission needed).
func (c *Client) Regions(ctx context.Context) ([]Region, error) {
	var rs []Region
	if _, err := c.do(ctx, c.api(http.MethodGet, "/regions"), &rs); err != nil {
		return nil, err
	}
	return rs, nil
}

// RegionRef is a region as the configuration named it (Given: a name or an id) and the id
// Daytona knows it by.
type RegionRef struct {
	ID, Given string
	// ByName reports that Given is a region's name, resolved to ID.
	ByName bool
}

// String names the region and how it was found, for messages.
func (r RegionRef) String() string {
	switch {
	case r.ID == "":
		return "the organization's default region"
	case r.ByName:
		return fmt.Sprintf("region %s (%q, resolved by name)", r.ID, r.Given)
	default:
		return fmt.Sprintf("region %s (given as its id)", r.ID)
	}
}

// ResolveRegion turns a region name or id into the region's id. Daytona's sandbox create
// takes either as `target`, but snapshot create looks `regionId` up by id only (v0.190
// apps/api/src/sandbox/services/snapshot.service.ts, getValidatedOrDefaultRegion), so a
// snapshot is always created with the id. A name wins over an id, as in a sandbox create. "" stays "" (the
// organization's default region, which both endpoints use when none is given).
func (c *Client) ResolveRegion(ctx context.Context, idOrName string) (RegionRef, error) {
	idOrName = strings.TrimSpace(idOrName)
	if idOrName == "" {
		return RegionRef{}, nil
	}
	key := regionKey(c, idOrName)
	if ref, ok := regionCache.get(key); ok {
		return ref, nil
	}
	rs, err := c.Regions(ctx)
	if err != nil {
		return RegionRef{}, fmt.Errorf("listing Daytona regions to resolve %q: %w", idOrName, err)
	}
	// A name first, then an id: the order in which a sandbox create resolves its target
	// (v0.190 apps/api/src/sandbox/services/sandbox.service.ts:2825-2828), so that a
	// snapshot is built in the region its sandboxes will ask for, even where one region's
	// name is another's id.
	if i := slices.IndexFunc(rs, func(r Region) bool { return r.Name == idOrName }); i >= 0 {
		ref := RegionRef{ID: rs[i].ID, Given: idOrName, ByName: rs[i].ID != idOrName}
		regionCache.put(key, ref)
		return ref, nil
	}
	if i := slices.IndexFunc(rs, func(r Region) bool { return r.ID == idOrName }); i >= 0 {
		ref := RegionRef{ID: rs[i].ID, Given: idOrName}
		regionCache.put(key, ref)
		return ref, nil
	}
	known := make([]string, 0, len(rs))
	for _, r := range rs {
		known = append(known, fmt.Sprintf("%s (id %s)", r.Name, r.ID))
	}
	return RegionRef{}, fmt.Errorf("region %q is neither the id nor the name of a region available to the Daytona organization; available: %s",
		idOrName, strings.Join(known, ", "))
}

// regionCacheTTL bounds how long a resolved region is reused without asking Daytona:
// regions seldom change, and a refresh should read each snapshot once, not the region
// list as well.
const regionCacheTTL = 10 * time.Minute

// regionCache holds resolved regions by API, key and name, for all clients of the process
// (the provider makes a client per operation).
var regionCache = &regionMemo{m: map[string]regionEntry{}}

type regionEntry struct {
	ref     RegionRef
	expires time.Time
}

type regionMemo struct {
	mu sync.Mutex
	m  map[string]regionEntry
}

func (m *regionMemo) get(key string) (RegionRef, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[key]
	if !ok || time.Now().After(e.expires) {
		return RegionRef{}, false
	}
	return e.ref, true
}

func (m *regionMemo) put(key string, ref RegionRef) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[key] = regionEntry{ref: ref, expires: time.Now().Add(regionCacheTTL)}
}

// regionKey identifies a region name within one organization: the API, a digest of the
// key (an API key belongs to one organization) and the name.
func regionKey(c *Client, idOrName string) string {
	sum := sha256.Sum256([]byte(c.apiKey + "\x00" + c.orgID))
	return c.baseURL + "\x00" + hex.EncodeToString(sum[:8]) + "\x00" + idOrName
}

// snapshotRegion is the region a snapshot of spec region specRegion must live in: that
// region when set, else the client's target (the sandbox provider's), resolved to its id.
func (b *Builder) snapshotRegion(ctx context.Context, specRegion string) (RegionRef, error) {
	if specRegion == "" {
		specRegion = b.C.target
	}
	return b.C.ResolveRegion(ctx, specRegion)
}

// inRegion reports whether snapshot s is available in region (always, for the default).
// Daytona answers a sandbox create with a target outside the snapshot's regionIds with 400
// "Snapshot X is not available in region Y" (v0.190 sandbox.service.ts, createFromSnapshot).
func inRegion(s *Snapshot, region RegionRef) bool {
	return region.ID == "" || slices.Contains(s.RegionIDs, region.ID)
}

// snapshotTarget is the target of a sandbox made from snapshot name: "" (the client's
// target, the sandbox provider's) when the snapshot is there, else the snapshot's own
// region. A snapshot lives only in its region (Daytona answers a create elsewhere with 400
// "Snapshot X is not available in region Y"); it was built in the environment's region,
// or in the target's at the time, so its sandboxes run where it lives. When the snapshot
// cannot be read, the create itself reports why.
func (r *Runtime) snapshotTarget(ctx context.Context, name string) string {
	s, err := r.C.GetSnapshot(ctx, name)
	if err != nil || len(s.RegionIDs) == 0 || slices.Contains(s.RegionIDs, r.C.target) {
		return ""
	}
	if r.C.target != "" {
		if ref, err := r.C.ResolveRegion(ctx, r.C.target); err == nil && inRegion(s, ref) {
			return ""
		}
	}
	return s.RegionIDs[0]
}
