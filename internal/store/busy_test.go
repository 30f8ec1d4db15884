package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// TestIsBusy: a write refused because another connection holds the database's lock is
// IsBusy, by SQLite's result code (not its text), wrapped or not; other errors are not.
func TestIsBusy(t *testing.T) {
	err := storetest.BusyError(t)
	if !store.IsBusy(err) || !store.IsBusy(fmt.Errorf("updating environment: %w", err)) {
		t.Fatalf("IsBusy(%v) = false; want true", err)
	}
	for _, e := range []error{nil, errors.New("database is locked (5) (SQLITE_BUSY)"), store.ErrNotFound} {
		if store.IsBusy(e) {
			t.Errorf("IsBusy(%v) = true; want false", e)
		}
	}
}
