package daytona

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

var _ sandbox.Relabeler = (*Runtime)(nil)

// ReplaceSandboxLabels replaces all of a sandbox's labels (PUT /sandbox/{id}/labels) and
// returns the labels the answer carries. v0.190 answers the whole Sandbox
// (apps/api/src/sandbox/controllers/sandbox.controller.ts:686, toSandboxDto) although
// its OpenAPI document names SandboxLabels ({labels}, :657-661); both have labels, which
// is all that is read here.
//
// The API updates the sandbox only if its state, desiredState and pending are still what
// it read (apps/api/src/sandbox/repositories/sandbox.repository.ts:103-116) and answers
// 409 "Sandbox was modified by another operation" otherwise, e.g. when the sandbox stops
// meanwhile. The replace had no effect then and repeating it is safe, so it is retried,
// with the client's backoff and attempts: that 409 is not the "state change in progress"
// one the retry policy already retries.
func (c *Client) ReplaceSandboxLabels(ctx context.Context, idOrName string, labels map[string]string) (map[string]string, error) {
	if labels == nil {
		labels = map[string]string{} // null would clear the column, not replace the labels
	}
	r := c.api(http.MethodPut, "/sandbox/%s/labels", esc(idOrName))
	r.body = map[string]any{"labels": labels}
	for attempt := 1; ; attempt++ {
		var out struct {
			Labels map[string]string `json:"labels"`
		}
		_, err := c.do(ctx, r, &out)
		if err == nil {
			return out.Labels, nil
		}
		if !isModifiedConflict(err) || attempt >= c.retry.MaxAttempts {
			return nil, err
		}
		if serr := sleep(ctx, c.retry.backoff(attempt)); serr != nil {
			return nil, fmt.Errorf("%w (gave up waiting to retry: %w)", err, serr)
		}
	}
}

// isModifiedConflict reports the API's SandboxConflictError (v0.190
// apps/api/src/sandbox/errors/sandbox-conflict.error.ts:10): an optimistic update lost
// to another change of the sandbox.
func isModifiedConflict(err error) bool {
	e, ok := asAPI(err)
	return ok && e.Status == http.StatusConflict && strings.Contains(strings.ToLower(e.Message), "modified by another operation")
}

// sandboxLabels are the labels a sandbox with runtime id id and the harness's labels
// carries: the runtime's own (listLabels: Labels and trueforge.managed, which List
// selects by), the harness's, and trueforge.id, which List and Get read the id from.
// Create and Relabel both use it, so a relabelled sandbox carries what one created with
// those labels would.
func (r *Runtime) sandboxLabels(id string, harness map[string]string) (map[string]string, error) {
	labels := r.listLabels()
	for k, v := range harness {
		if k == LabelManaged || k == LabelID {
			return nil, fmt.Errorf("label %q is reserved", k)
		}
		labels[k] = v
	}
	labels[LabelID] = id
	return labels, nil
}

// Relabel replaces the harness's labels of sandbox id with labels. Daytona's PUT replaces
// every label, so the runtime's own are sent with them: they are computed from the
// runtime and the id (sandboxLabels), as at create, rather than read first, which saves
// a GET when a session claims a warm pool member. A missing sandbox (or one being
// deleted, which Daytona has renamed) is sandbox.ErrNotFound.
func (r *Runtime) Relabel(ctx context.Context, id string, labels map[string]string) error {
	want, err := r.sandboxLabels(id, labels)
	if err == nil {
		_, err = r.C.ReplaceSandboxLabels(ctx, id, want)
	}
	if err != nil {
		return fmt.Errorf("daytona: relabel sandbox %s: %w", id, err)
	}
	return nil
}
