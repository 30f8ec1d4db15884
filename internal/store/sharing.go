package store

import "slices"

// ShareAll in a shared_with list shares an object with every owner of the control plane.
const ShareAll = "*"

// UsableBy is the one rule of who may use an owner's shareable object (an environment
// with secrets, a volume): its owner, and the owners its shared_with list names ("*":
// everyone). Names are compared exactly, as PostgreSQL compares role names. The
// provider's plan checks, the harness's run-time checks and the store's SQL policies
// (migration 14's trueforge_usable_by) all decide by this rule.
func UsableBy(owner string, sharedWith []string, who string) bool {
	return who == owner || slices.Contains(sharedWith, ShareAll) || slices.Contains(sharedWith, who)
}

// migrationSharing (14): placeholder, replaced by the change that fills it in.
var migrationSharing = migration{sql: `SELECT 1`}
