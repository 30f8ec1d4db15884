// Package sandbox defines what trueforge needs from a sandbox backend (Backend): snapshot
// builds, sandboxes (Runtime), secrets and plan-time checks, and the parts of the contract
// every runtime shares (command.go). Backends live in subpackages; the provider and the
// harness reach them only through internal/backends, by the sandbox provider's type.
package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sort"
)

// Snapshot build states, as shown in an environment's status.
const (
	StatusBuilding = "Building"
	StatusReady    = "Ready"
	StatusFailed   = "Failed"
)

// PlatformImage is the image name of the host-provided base for the local backend and the
// release snapshot's image everywhere.
const PlatformImage = "platform"

// SnapshotSpec holds the build inputs of an environment: exactly the attributes that bake a
// snapshot. Anything not in here (env vars, network policy, secrets) is applied live.
type SnapshotSpec struct {
	Image       string            `json:"image"`
	BuildScript string            `json:"build_script"`
	CPU         int64             `json:"cpu"`
	MemoryGB    int64             `json:"memory"`
	DiskGB      int64             `json:"disk"`
	Triggers    map[string]string `json:"triggers"`
	// The inputs below were added after the first release: each is omitted from the
	// build hash's encoding while unset, so that every existing snapshot keeps its hash.
	GPU     int64  `json:"gpu,omitempty"`
	GPUType string `json:"gpu_type,omitempty"`
	// Dockerfile, when set, replaces Image and BuildScript: the snapshot is built from it,
	// with the build context whose files hash to ContextHash.
	Dockerfile  string   `json:"dockerfile,omitempty"`
	ContextHash string   `json:"context_hash,omitempty"`
	Entrypoint  []string `json:"entrypoint,omitempty"`
	// Region is where the snapshot must live ("" for the provider's target).
	Region string `json:"region,omitempty"`
	// Registry names the private registry Image or Dockerfile pulls from ("" for none).
	Registry string `json:"registry,omitempty"`
	// Rebuild counts the builds of the same inputs that trueforge_environment_rebuild
	// forced (0 for none): a content-addressed snapshot of unchanged inputs is the same
	// snapshot, so a forced build needs an input that differs, and this is it.
	Rebuild int64 `json:"rebuild,omitempty"`
}

// BuildHash is the content address of a snapshot: identical inputs, in any environment or
// team, hash the same and so build once.
func (s SnapshotSpec) BuildHash() string {
	keys := make([]string, 0, len(s.Triggers))
	for k := range s.Triggers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	trig := make([][2]string, 0, len(keys))
	for _, k := range keys {
		trig = append(trig, [2]string{k, s.Triggers[k]})
	}
	// A versioned, ordered encoding so that the hash never depends on map order and can
	// evolve without colliding with older hashes.
	b, _ := json.Marshal(struct {
		V           int         `json:"v"`
		Image       string      `json:"image"`
		Script      string      `json:"build_script"`
		CPU         int64       `json:"cpu"`
		Memory      int64       `json:"memory"`
		Disk        int64       `json:"disk"`
		Triggers    [][2]string `json:"triggers"`
		GPU         int64       `json:"gpu,omitempty"`
		GPUType     string      `json:"gpu_type,omitempty"`
		Dockerfile  string      `json:"dockerfile,omitempty"`
		ContextHash string      `json:"context_hash,omitempty"`
		Entrypoint  []string    `json:"entrypoint,omitempty"`
		Region      string      `json:"region,omitempty"`
		Registry    string      `json:"registry,omitempty"`
		Rebuild     int64       `json:"rebuild,omitempty"`
	}{1, s.Image, s.BuildScript, s.CPU, s.MemoryGB, s.DiskGB, trig,
		s.GPU, s.GPUType, s.Dockerfile, s.ContextHash, s.Entrypoint, s.Region, s.Registry, s.Rebuild})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// SnapshotID is the stable identifier of the snapshot built from a build hash.
func SnapshotID(buildHash string) string { return "snap-" + buildHash[:20] }

// BuildRequest asks a backend to bake a snapshot.
type BuildRequest struct {
	ID   string       // snapshot id (content-addressed)
	Spec SnapshotSpec //
	// Base is the snapshot the build starts from (the release snapshot for the platform image).
	Base string
	// BlockNetwork runs the build with no network at all.
	BlockNetwork bool
	// Egress, when set, limits the build to its allow list, through an egress proxy
	// (buildegress.go); BlockNetwork wins over it. A local build without it still goes
	// through a proxy, one that admits every public host, never the host's network.
	Egress *BuildEgress
	// ContextDir is the build_context folder on this machine when Spec.Dockerfile is set
	// ("" for none). The builder reads it again with ReadBuildContext and refuses it when
	// its hash is no longer Spec.ContextHash (a file changed since plan).
	ContextDir string
}

// BuildState is what a backend knows about a build.
type BuildState struct {
	Status string // StatusBuilding, StatusReady or StatusFailed
	// Reason says why a build failed, in one line.
	Reason string
	// LogTail is the end of the build log (a few KiB at most).
	LogTail string
}

// ErrNotFound is returned (wrapped) when a backend object does not exist.
var ErrNotFound = errors.New("not found")

// SnapshotBuilder bakes and removes snapshots. Start returns once the build is running; it
// must keep running if the calling process exits, so a Terraform timeout never orphans it.
type SnapshotBuilder interface {
	// PrepareRelease creates the release snapshot every other snapshot starts from and
	// returns its id. It is idempotent.
	PrepareRelease(ctx context.Context) (string, error)
	StartBuild(ctx context.Context, req BuildRequest) error
	BuildState(ctx context.Context, id string) (BuildState, error)
	// DeleteSnapshot removes a snapshot and stops its build if one is running. A snapshot
	// that does not exist is not an error.
	DeleteSnapshot(ctx context.Context, id string) error
}
