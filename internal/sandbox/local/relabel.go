//go:build linux

package local

import (
	"context"
	"fmt"
	"maps"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

var _ sandbox.Relabeler = (*Runtime)(nil)

// Relabel replaces the sandbox's labels with labels, which are checked as Create checks
// them. The runtime sets no labels of its own, so state.json's labels are all the
// harness's and are replaced whole.
//
// It runs as a lifecycle step, under the sandbox's exclusive lock: a keeper being started
// by an Exec (which holds the shared lock) may write the record it read (ensureSlot), and
// that write must not put back the old labels; and a Stop, Start or Archive writing its
// status must not either. Get and List take no lock: the record is replaced by a rename
// (writeRecord), so they read the old labels or the new, never a mix. A missing sandbox
// is sandbox.ErrNotFound.
func (r *Runtime) Relabel(_ context.Context, id string, labels map[string]string) error {
	if err := validID(id); err != nil {
		return fmt.Errorf("local: relabel sandbox: %w", err)
	}
	if err := checkLabels(labels); err != nil {
		return fmt.Errorf("local: relabel sandbox %s: %w", id, err)
	}
	return r.lifecycleStep(id, "relabel", func(rec record) error {
		rec.Labels = maps.Clone(labels) // none: omitted from the record, as at Create
		return writeRecord(r.dir(id), rec)
	})
}
