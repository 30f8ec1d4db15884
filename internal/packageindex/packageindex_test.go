package packageindex

import (
	"reflect"
	"strings"
	"testing"
)

func TestHostsExpandsSortsAndDeduplicates(t *testing.T) {
	got, err := Hosts([]string{"pypi", "npm", "pypi"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"files.pythonhosted.org", "pypi.org", "registry.npmjs.org"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Hosts = %v, want %v", got, want)
	}
	if _, err := Hosts([]string{"pipy"}); err == nil || !strings.Contains(err.Error(), "pypi") {
		t.Fatalf("an unknown index: %v, want an error listing the known ones", err)
	}
	for _, n := range Names() {
		if h, err := Hosts([]string{n}); err != nil || len(h) == 0 {
			t.Errorf("index %s has no hosts: %v", n, err)
		}
	}
}
