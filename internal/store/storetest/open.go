package storetest

import (
	"context"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Open opens the control-plane database at url (an SQLite path, or a PostgreSQL URL
// such as pgtest's) for a test, failing it when the store cannot be opened, and closes
// the store when the test ends: what a test of a store's user starts with.
func Open(tb testing.TB, url string) *store.Store {
	tb.Helper()
	st, err := store.Open(context.Background(), url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}
