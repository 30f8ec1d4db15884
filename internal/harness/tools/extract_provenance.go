package tools

import (
	"context"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// provenance is the lineage an artifact at workspace path p gets from the session's
// extractions: the archive it was unpacked from (and the archives that one came from),
// or, when p is an archive that was extracted, that archive's own record. A failed
// lookup gives none: lineage is a record, not a gate, and the offer goes on.
func (in invocation) provenance(ctx context.Context, p string) []store.Provenance {
	prov, err := in.x.Store.ProvenanceOf(ctx, in.c.SessionID, p)
	if err != nil {
		return nil
	}
	return prov
}
