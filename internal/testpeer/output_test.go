package testpeer

import (
	"strings"
	"testing"
)

func TestOutputKeepsTheTail(t *testing.T) {
	b := &Output{Max: 8}
	for _, s := range []string{"abc", "defgh", "ijk"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := b.String(); got != "defghijk" {
		t.Fatalf("kept %q, want the last 8 bytes %q", got, "defghijk")
	}
	var d Output
	_, _ = d.Write([]byte(strings.Repeat("x", DefaultMax+10)))
	if len(d.String()) != DefaultMax {
		t.Fatalf("an Output without Max kept %d bytes, want %d", len(d.String()), DefaultMax)
	}
}
