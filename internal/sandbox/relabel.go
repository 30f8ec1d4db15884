package sandbox

import "context"

// Relabeler is implemented by a Runtime that can change an existing sandbox's labels.
// The harness relabels a warm pool member when a session claims it, so that what lists
// the backend's sandboxes (the orphan sweep, `sandboxes list`, the backend's own
// console) sees the session's labels, not the pool's.
type Relabeler interface {
	// Relabel replaces the labels the harness set at create (CreateRequest.Labels) with
	// labels. The backend's own labels under ReservedLabelPrefix that the harness did not
	// set (Daytona's trueforge.id and trueforge.managed, for example) are kept as they
	// are. A missing sandbox is ErrNotFound.
	Relabel(ctx context.Context, id string, labels map[string]string) error
}
