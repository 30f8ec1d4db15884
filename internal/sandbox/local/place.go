package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// SharedDirEnv names a directory that holds the local backend's snapshots on storage
// that every machine of a control plane mounts at that same path (NewBackend reads it).
// Set the same value where Terraform applies and where the harness runs: snapshots are
// then built into it and run from it on any of those machines. Unset, snapshots live in
// the data directory of the machine that built them (DataDir/local-backend) and only a
// harness on that machine, with that data directory, can run them. Sandboxes are not
// shared either way: they stay in each machine's data directory.
const SharedDirEnv = "TRUEFORGE_LOCAL_SHARED_DIR"

// machineIDFiles are where a Linux machine keeps its stable identity (systemd's, then
// D-Bus's older path).
var machineIDFiles = []string{"/etc/machine-id", "/var/lib/dbus/machine-id"}

// Machine identifies the machine a process runs on.
type Machine struct {
	// ID is stable across reboots and renames: the machine id (/etc/machine-id), or
	// "hostname:<name>" on a machine that has none.
	ID string
	// Hostname names it in messages.
	Hostname string
}

// ThisMachine is the machine this process runs on. Containers made from one image may
// share an /etc/machine-id; give each its own (systemd-machine-id-setup) if they keep
// local snapshots apart.
func ThisMachine() Machine {
	host, _ := os.Hostname()
	for _, f := range machineIDFiles {
		if b, err := os.ReadFile(f); err == nil {
			if id := strings.TrimSpace(string(b)); id != "" {
				return Machine{ID: id, Hostname: host}
			}
		}
	}
	return Machine{ID: "hostname:" + host, Hostname: host}
}

// snapshotRoot is the builder root of a control plane whose data directory is dataDir:
// the shared directory when one is set, else Root(dataDir).
func (b *Backend) snapshotRoot(dataDir string) (string, error) {
	if b.SharedDir == "" {
		return Root(dataDir), nil
	}
	if !filepath.IsAbs(b.SharedDir) {
		return "", fmt.Errorf("the local backend's shared snapshot directory (%s) is %q: it must be an absolute path, "+
			"the one at which every machine of the control plane mounts it", SharedDirEnv, b.SharedDir)
	}
	return filepath.Clean(b.SharedDir), nil
}

// place is where a builder rooted at root keeps its snapshots, as this backend sees it.
func (b *Backend) place(root string) sandbox.Place {
	m := b.Machine
	if m.ID == "" {
		m = ThisMachine()
	}
	if b.SharedDir != "" {
		return sandbox.Place{Host: m.Hostname, Dir: root, Shared: true}
	}
	return sandbox.Place{Host: m.Hostname, Machine: m.ID, Dir: root}
}

var (
	_ sandbox.Placed = (*Builder)(nil)
	_ sandbox.Placed = (*Runtime)(nil)
)

// SnapshotPlace is where this builder keeps its snapshots: its root, on this machine
// unless the backend made it on a shared directory.
func (b *Builder) SnapshotPlace() sandbox.Place {
	if b.place.Dir != "" {
		return b.place
	}
	m := ThisMachine()
	return sandbox.Place{Host: m.Hostname, Machine: m.ID, Dir: b.root}
}

// SnapshotPlace is where this runtime finds the snapshots it runs: its builder's.
func (r *Runtime) SnapshotPlace() sandbox.Place { return r.b.SnapshotPlace() }
