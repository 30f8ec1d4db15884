// Package catalog is the built-in list of sandbox provider types a control plane can be
// configured with, and what each needs.
package catalog

import "sort"

// The scopes a Daytona API key needs: trueforge builds snapshots, creates sandboxes from
// them and syncs secrets.
var DaytonaScopes = []string{"write:sandboxes", "write:snapshots", "manage:secrets"}

// Entry describes one sandbox provider type.
type Entry struct {
	Type        string
	Description string
	// Available is false for types listed for discovery whose backend this build lacks.
	Available bool
	// NeedsAPIKey says whether api_key (or api_key_wo) is required.
	NeedsAPIKey bool
	// DefaultAPIURL is used when api_url is not set.
	DefaultAPIURL string
}

var entries = map[string]Entry{
	"local": {
		Type:        "local",
		Description: "Embedded backend on this Linux machine: bubblewrap sandboxes on overlay snapshots of the host's system directories.",
		Available:   true,
	},
	"daytona": {
		Type:          "daytona",
		Description:   "Daytona sandboxes, snapshots and secrets through the Daytona API.",
		Available:     true,
		NeedsAPIKey:   true,
		DefaultAPIURL: "https://app.daytona.io/api",
	},
}

// Lookup returns the entry for a type.
func Lookup(typ string) (Entry, bool) {
	e, ok := entries[typ]
	return e, ok
}

// Types lists every catalog type, sorted.
func Types() []string {
	out := make([]string, 0, len(entries))
	for t := range entries {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
