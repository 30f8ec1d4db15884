package store

// migrationEnvironmentSettings (11) adds one JSON document to each environment for the
// attributes added after the first release, so that a new attribute needs no schema
// change of its own: build inputs beyond the columns (they are part of the snapshot's
// spec, and so of its build hash, too) and live settings. Unknown keys written by a newer
// release are ignored by an older one, which never rewrites a row it cannot plan anyway
// (the schema version check refuses it first).
var migrationEnvironmentSettings = migration{sql: `
ALTER TABLE environments ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';
`}

// EnvironmentSettings are an environment's attributes stored in its settings document.
// The zero value is an environment that sets none of them.
type EnvironmentSettings struct {
	// Build inputs (each part of the snapshot's build hash).
	GPU        int64    `json:"gpu,omitempty"`
	GPUType    string   `json:"gpu_type,omitempty"`
	Dockerfile string   `json:"dockerfile,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Region     string   `json:"region,omitempty"`
	// BuildContext is the build_context folder as configured, and ContextHash the
	// digest of its files (the build hash covers the digest, not the path).
	BuildContext string `json:"build_context,omitempty"`
	ContextHash  string `json:"context_hash,omitempty"`
	// Registry names the trueforge_registry the image or Dockerfile pulls from ("" for a
	// public image).
	Registry string `json:"registry,omitempty"`
	// Rebuild is how many times trueforge_environment_rebuild forced a new build of the
	// same inputs (sandbox.SnapshotSpec.Rebuild; 0, and then out of the hash, for none).
	// It is kept here, not in a column of its own, because this document is where the
	// build inputs beyond the first release live: it needs no migration, and on
	// PostgreSQL it is written under the environments table's row-level security, by
	// the environment's owner only, like every other input.
	Rebuild int64 `json:"rebuild,omitempty"`

	// Live settings: applied without a rebuild, to sandboxes created afterwards.
	// KeepVersions is how many previous versions are kept from collection (nil:
	// DefaultKeepVersions; environment_versions.go).
	KeepVersions *int64 `json:"keep_versions,omitempty"`

	Labels     map[string]string `json:"labels,omitempty"`
	AllowCIDRs []string          `json:"allow_cidrs,omitempty"`
	// PackageIndexes are named package indexes (pypi, npm, ...) whose hosts are allowed;
	// PackageIndexesIn is "build" or "build_and_sandbox" ("" when none are named).
	PackageIndexes   []string `json:"package_indexes,omitempty"`
	PackageIndexesIn string   `json:"package_indexes_in,omitempty"`
	// Volumes are mounted in every sandbox of the environment; a volume named here
	// cannot be deleted (volumes.go).
	Volumes []EnvironmentVolume `json:"volumes,omitempty"`
	// WarmPool is how many sandboxes the harness keeps ready for the environment's
	// sessions (warm_pools.go); nil keeps none.
	WarmPool *WarmPool `json:"warm_pool,omitempty"`
	// Rollout sends part of the new sessions to the latest previous kept version
	// (agents/rollout.go); nil sends every one to the current version.
	Rollout *Rollout `json:"rollout,omitempty"`
}

// Rollout is an environment's rollout setting.
type Rollout struct {
	// Percent of new sessions, 1 to 100, whose sandboxes use the current version; the
	// others use the latest previous kept version.
	Percent int64 `json:"percent"`
}

// WarmPool is an environment's warm_pool setting.
type WarmPool struct {
	// Size is how many ready sandboxes serve keeps (0: none, the pool drains).
	Size int64 `json:"size"`
	// MaxAgeSeconds is how long a member may wait unclaimed before it is replaced.
	MaxAgeSeconds int64 `json:"max_age_seconds"`
}

// EnvironmentVolume is one entry of an environment's volumes.
type EnvironmentVolume struct {
	Volume    string `json:"volume"` // the trueforge_volume's name
	MountPath string `json:"mount_path"`
	Subpath   string `json:"subpath,omitempty"`
}
