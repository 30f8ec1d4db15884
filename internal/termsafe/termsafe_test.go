package termsafe

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// Attacks seen reaching a terminal: each comes out as visible escapes, with nothing
// left that a terminal acts on.
func TestEscapesWhatDrivesATerminal(t *testing.T) {
	for _, c := range []struct{ in, text, line string }{
		{"plain text, ünïcode, 日本語, emoji 👩\u200d💻\n\tindented", "plain text, ünïcode, 日本語, emoji 👩\u200d💻\n\tindented", `plain text, ünïcode, 日本語, emoji 👩` + "\u200d" + `💻\n\tindented`},
		{"\x1b]52;c;ZXZpbA==\x07", `\x1b]52;c;ZXZpbA==\x07`, `\x1b]52;c;ZXZpbA==\x07`},
		{"\x1b[2Jgone", `\x1b[2Jgone`, `\x1b[2Jgone`},
		{"ok\r  [sandbox] PROVISIONED", `ok\r  [sandbox] PROVISIONED`, `ok\r  [sandbox] PROVISIONED`},
		{"file\u202etxt.exe", `file\u202etxt.exe`, `file\u202etxt.exe`},
		{"\u2066iso\u2069 \u200b \ufeff \u2028", `\u2066iso\u2069 \u200b \ufeff \u2028`, `\u2066iso\u2069 \u200b \ufeff \u2028`},
		{"c1 \u009b31m del \x7f", `c1 \u009b31m del \u007f`, `c1 \u009b31m del \u007f`},
		{"bad \xff\xe2\x80 utf8", `bad \xff\xe2\x80 utf8`, `bad \xff\xe2\x80 utf8`},
		{"tag \U000E0041", `tag \udb40\udc41`, `tag \udb40\udc41`},
	} {
		if got := Text(c.in); got != c.text {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.text)
		}
		if got := Line(c.in); got != c.line {
			t.Errorf("Line(%q) = %q, want %q", c.in, got, c.line)
		}
		var b bytes.Buffer
		if n, err := NewWriter(&b).Write([]byte(c.in)); err != nil || n != len(c.in) || b.String() != c.text {
			t.Errorf("Writer(%q) wrote %q (n %d, %v), want %q", c.in, b.String(), n, err, c.text)
		}
		assertInert(t, b.Bytes())
	}
}

// assertInert fails if p is not valid UTF-8 or holds a rune Writer escapes.
func assertInert(t *testing.T, p []byte) {
	t.Helper()
	if !utf8.Valid(p) {
		t.Errorf("invalid UTF-8 written: %q", p)
	}
	for _, r := range string(p) {
		if Unsafe(r, true) {
			t.Errorf("%U written raw in %q", r, p)
		}
	}
}

// JSON written through a Writer decodes to exactly what was encoded.
func TestJSONThroughAWriterStaysExact(t *testing.T) {
	in := map[string]string{"text": "a\x1b]52;c;ZXZpbA==\x07 \x1b[2J x\r  [sandbox] forged \u202eabc \u0085 \x7f \U000E0041 \u2028 \\x1b \"q\""}
	var b bytes.Buffer
	if err := json.NewEncoder(NewWriter(&b)).Encode(in); err != nil {
		t.Fatal(err)
	}
	assertInert(t, b.Bytes())
	var out map[string]string
	if err := json.Unmarshal(b.Bytes(), &out); err != nil {
		t.Fatalf("%v: %s", err, b.Bytes())
	}
	if out["text"] != in["text"] {
		t.Fatalf("decoded %q, want %q", out["text"], in["text"])
	}
}
