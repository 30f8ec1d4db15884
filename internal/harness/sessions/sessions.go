// Package sessions is what the CLI (trueforge-harness sessions) and the HTTP API do to a
// session in the same way, written once so that the two never drift apart.
package sessions

import (
	"context"
	"errors"
	"fmt"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Delete deletes session id: its sandbox (when sandboxes is not nil), then its rows,
// events and artifacts. Not under a live run: its harness would go on writing to a
// session whose rows and sandbox are gone, so runs of dead harnesses are ended first and
// a live one elsewhere refuses the delete with runner.ErrBusy (wrapped). A session
// already gone is not an error.
func Delete(ctx context.Context, st *store.Store, sandboxes *lifecycle.Manager, id string) error {
	if _, err := runner.Repair(ctx, st, id, lifecycle.ProcessOwner(), 0); err != nil {
		if errors.Is(err, runner.ErrBusy) {
			return fmt.Errorf("session %s is in use, so it was not deleted: %w", id, err)
		}
		return err
	}
	if sandboxes != nil {
		if err := sandboxes.Delete(ctx, id); err != nil {
			return fmt.Errorf("deleting the sandbox of session %s: %w", id, err)
		}
	}
	if err := st.DeleteSession(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}
