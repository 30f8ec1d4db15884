package harnesstest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// ShareMachine sets, for the rest of the test, what the replicas and helper processes of
// one machine share and inherit from it: a data directory of the test's own and one
// fresh secret key.
func ShareMachine(tb testing.TB) {
	tb.Helper()
	tb.Setenv(store.DataDirEnv, tb.TempDir())
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	tb.Setenv(secretbox.KeyEnv, base64.StdEncoding.EncodeToString(key))
}

// Payloads decodes the payloads of session's events of kind, in order: what a test of
// what runs recorded reads.
func Payloads(tb testing.TB, st *store.Store, session, kind string) []map[string]any {
	tb.Helper()
	evs, err := st.Events(context.Background(), session, 0)
	if err != nil {
		tb.Fatal(err)
	}
	var out []map[string]any
	for _, e := range evs {
		if e.Kind == kind {
			var m map[string]any
			if err := json.Unmarshal(e.Payload, &m); err != nil {
				tb.Fatal(err)
			}
			out = append(out, m)
		}
	}
	return out
}
