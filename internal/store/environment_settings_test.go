package store

import (
	"context"
	"reflect"
	"testing"
)

// The settings document round-trips through create, update and a fresh process's read,
// on both databases, and an environment that sets nothing reads back the zero value.
func TestEnvironmentSettingsRoundTrip(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		seed(t, st)
		ctx := context.Background()
		e, err := st.GetEnvironment(ctx, "py")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(e.Settings, EnvironmentSettings{}) {
			t.Fatalf("settings of an environment that sets none = %+v", e.Settings)
		}
		want := EnvironmentSettings{
			GPU: 1, GPUType: "H100", Dockerfile: "FROM python:3.12\n", Entrypoint: []string{"sleep", "infinity"}, Region: "eu",
			BuildContext: "ctx", ContextHash: "abc", Labels: map[string]string{"team": "data"}, AllowCIDRs: []string{"10.0.0.0/8"},
			PackageIndexes: []string{"pypi"}, PackageIndexesIn: "build",
		}
		e.Settings = want
		must(t, st.UpdateEnvironment(ctx, e))
		got, err := reopen(t, st).GetEnvironment(ctx, "py")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Settings, want) {
			t.Fatalf("settings read back = %+v, want %+v", got.Settings, want)
		}
	})
}
