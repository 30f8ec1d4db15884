package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// ErrSnapshotElsewhere is why a sandbox is not provisioned here: its snapshot's files are
// on another machine (or in another directory) than the one this harness's backend
// reads.
var ErrSnapshotElsewhere = errors.New("the snapshot's files are not on this machine")

// checkPlace refuses a snapshot that a runtime whose snapshots are files on a machine
// (sandbox.Placed: the local backend) cannot reach: one whose recorded place
// (snapshots.host, written when its build was claimed) is another machine, another
// directory, or a shared directory this harness does not use. A runtime of a remote
// backend, and a snapshot whose place is unrecorded, pass: there is nothing to compare.
// The error names the snapshot, where it is, and what to do.
func (m *Manager) checkPlace(ctx context.Context, rt sandbox.Runtime, envName, snapshotID string) error {
	pl, ok := rt.(sandbox.Placed)
	if !ok {
		return nil
	}
	recorded, err := m.cfg.Store.SnapshotHost(ctx, snapshotID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // the runtime says what is missing
	}
	if err != nil {
		return err
	}
	snap, ok := sandbox.ParsePlace(recorded)
	if !ok {
		return nil
	}
	here := pl.SnapshotPlace()
	if here.Reaches(snap) {
		return nil
	}
	what := fmt.Sprintf("snapshot %s of environment %q is in the %s", snapshotID, envName, snap)
	var todo string
	switch {
	case snap.Shared:
		todo = fmt.Sprintf("this harness keeps the local backend's snapshots in %s. Set TRUEFORGE_LOCAL_SHARED_DIR=%s for the harness (with the directory mounted there), "+
			"or use a Daytona sandbox provider, which multi-machine setups need", here, snap.Dir)
	case here.Shared:
		todo = fmt.Sprintf("this harness runs snapshots from the %s, and this one was not built into it. Rebuild the environment "+
			"where Terraform applies with TRUEFORGE_LOCAL_SHARED_DIR=%s set there too (change its triggers), or run the harness on host %s without it",
			here, here.Dir, snap.Host)
	case snap.Machine == here.Machine:
		todo = fmt.Sprintf("this harness, on the same machine, keeps the local backend's files in %s. Run it with the data directory "+
			"Terraform applied with (TRUEFORGE_DATA_DIR, or the same SQLite database), readable by the harness's user", here.Dir)
	default:
		todo = fmt.Sprintf("local snapshots live on the machine that built them, and this harness runs on host %s. Run the harness on host %s, "+
			"keep the local backend's snapshots in a directory every machine mounts at one path (TRUEFORGE_LOCAL_SHARED_DIR, set where "+
			"Terraform applies and where the harness runs), or use a Daytona sandbox provider, which multi-machine setups need", here.Host, snap.Host)
	}
	return fmt.Errorf("%w: %s; %s", ErrSnapshotElsewhere, what, todo)
}
