package sandbox

import (
	"encoding/json"
	"fmt"
)

// Place is where the files of a snapshot are, for a backend that keeps its snapshots as
// files on a machine (Capabilities.RemoteSnapshots false: the local backend): a
// directory on one machine, or a shared directory that every machine using it mounts at
// the same path. The store records the place of each snapshot such a backend builds
// (snapshots.host), so that a harness that cannot reach those files refuses to
// provision from the snapshot with a message naming it and its host, instead of failing
// to find it.
type Place struct {
	// Host is the hostname of the machine that built the snapshot, for messages.
	Host string `json:"host"`
	// Machine identifies that machine (its /etc/machine-id); "" for a shared directory.
	Machine string `json:"machine,omitempty"`
	// Dir is the directory that holds the snapshots (absolute).
	Dir string `json:"dir"`
	// Shared: Dir is shared storage, the same files at the same path on every machine
	// that uses it.
	Shared bool `json:"shared,omitempty"`
}

// Placed is implemented by the SnapshotBuilder and the Runtime of a backend whose
// snapshots are files on a machine: SnapshotPlace is where this process's builder puts
// them and its runtime looks for them.
type Placed interface {
	SnapshotPlace() Place
}

// Reaches reports whether a runtime at p finds the files of a snapshot at snap: the
// same directory, on the same machine unless the directory is shared.
func (p Place) Reaches(snap Place) bool {
	if p.Dir != snap.Dir || p.Shared != snap.Shared {
		return false
	}
	return p.Shared || p.Machine == snap.Machine
}

// Encode is the place as the store records it.
func (p Place) Encode() string {
	b, _ := json.Marshal(p)
	return string(b)
}

// ParsePlace reads a recorded place; ok is false for "" (unrecorded: a remote backend, or
// a snapshot built before places were recorded) and for text that is not a place.
func ParsePlace(s string) (p Place, ok bool) {
	if s == "" || json.Unmarshal([]byte(s), &p) != nil || p.Dir == "" {
		return Place{}, false
	}
	return p, true
}

// String names the place in messages.
func (p Place) String() string {
	if p.Shared {
		return fmt.Sprintf("shared directory %s (built on host %s)", p.Dir, p.Host)
	}
	id := p.Machine
	if len(id) > 12 {
		id = id[:12]
	}
	return fmt.Sprintf("directory %s on host %s (machine id %s)", p.Dir, p.Host, id)
}
