package catalog

import (
	"slices"
	"testing"
)

func TestCatalog(t *testing.T) {
	if got := Types(); !slices.Equal(got, []string{"daytona", "local"}) {
		t.Fatalf("Types() = %v", got)
	}
	d, ok := Lookup("daytona")
	if !ok || !d.Available || !d.NeedsAPIKey || d.DefaultAPIURL != "https://app.daytona.io/api" {
		t.Fatalf("daytona entry %+v", d)
	}
	l, ok := Lookup("local")
	if !ok || !l.Available || l.NeedsAPIKey {
		t.Fatalf("local entry %+v", l)
	}
	if _, ok := Lookup("docker"); ok {
		t.Fatal("unknown type found")
	}
	if !slices.Equal(DaytonaScopes, []string{"write:sandboxes", "write:snapshots", "manage:secrets"}) {
		t.Fatalf("DaytonaScopes = %v", DaytonaScopes)
	}
}
