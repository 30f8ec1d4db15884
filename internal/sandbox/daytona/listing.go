package daytona

import (
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// softDeletedPrefix starts the name Daytona gives a deleted sandbox,
// DESTROYED_<name>_<ms> (v0.190 apps/api/src/sandbox/entities/sandbox.entity.ts:310-324).
const softDeletedPrefix = "DESTROYED_"

// beingDestroyed reports whether Daytona is deleting sb. A deleted sandbox keeps its
// labels and stays in GET /sandbox, renamed, with desiredState destroyed and its state
// (started, then destroying) until the runner has destroyed it (v0.190
// adapters/sandbox-typeorm-search.adapter.ts:100-128 leaves out only state destroyed).
func beingDestroyed(sb *Sandbox) bool {
	return sb.DesiredState == SandboxDestroyed || sb.State == SandboxDestroying || sb.State == SandboxDestroyed ||
		strings.HasPrefix(sb.Name, softDeletedPrefix)
}

// listed turns GET /sandbox items into one SandboxInfo per runtime id: sandboxes being
// destroyed are left out (a sandbox deleted and created again under its id is listed once,
// as the new one, never as the old one that is going away), and of two items with one
// id, the one whose Daytona name is the id wins, then the newer. The items have no env
// (SandboxListItem), so neither has the result.
func listed(items []Sandbox, info func(*Sandbox) (sandbox.SandboxInfo, error)) []sandbox.SandboxInfo {
	type pick struct {
		sb   *Sandbox
		info sandbox.SandboxInfo
	}
	byID := map[string]pick{}
	var order []string
	for i := range items {
		sb := &items[i]
		if beingDestroyed(sb) {
			continue
		}
		in, _ := info(sb) // an errored sandbox is listed with its Daytona status, to be swept
		old, dup := byID[in.ID]
		if !dup {
			order = append(order, in.ID)
		}
		if !dup || preferred(sb, old.sb, in.ID) {
			byID[in.ID] = pick{sb, in}
		}
	}
	out := make([]sandbox.SandboxInfo, 0, len(order))
	for _, id := range order {
		out = append(out, byID[id].info)
	}
	return out
}

// preferred reports whether a is the better item than b for runtime id id.
func preferred(a, b *Sandbox, id string) bool {
	if (a.Name == id) != (b.Name == id) {
		return a.Name == id
	}
	return a.CreatedAt != nil && (b.CreatedAt == nil || a.CreatedAt.After(*b.CreatedAt))
}
