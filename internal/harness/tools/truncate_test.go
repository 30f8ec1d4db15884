package tools

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncateKeepsHeadAndTailWithMarker(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 5000; i++ {
		b.WriteString("line ")
		b.WriteString(strings.Repeat("é", i%7))
		b.WriteString("\n")
	}
	full := "HEAD-START\n" + b.String() + "TAIL-END"
	out, cut := Truncate(full, 1000, "call-9")
	if !cut {
		t.Fatal("not cut")
	}
	if !strings.HasPrefix(out, "HEAD-START") || !strings.HasSuffix(out, "TAIL-END") {
		t.Fatalf("head or tail lost: %q...%q", out[:20], out[len(out)-20:])
	}
	if !utf8.ValidString(out) {
		t.Fatal("cut inside a UTF-8 sequence")
	}
	if !strings.Contains(out, `read_output with call_id "call-9"`) || !strings.Contains(out, "bytes") {
		t.Fatalf("marker does not say how to fetch the rest: %q", out)
	}
	if len(out) > 1000+300 {
		t.Fatalf("%d bytes shown for a limit of 1000", len(out))
	}
	short, cut := Truncate("small", 1000, "x")
	if cut || short != "small" {
		t.Fatal("a short result was changed")
	}
}
