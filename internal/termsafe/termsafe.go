// Package termsafe shows untrusted text on a terminal without letting it drive the
// terminal: control characters, bidirectional overrides and other invisible format
// characters are written as visible escapes (\x1b, \r, \u202e), so text from a sandbox,
// an MCP server or a model can neither run terminal sequences (OSC 52 writes the
// clipboard, ESC[2J clears the screen) nor hide, overwrite or reorder a line.
//
// Escapes are chosen to be valid inside a JSON string as well (C0 bytes never appear
// raw in JSON, every other escaped rune is \uXXXX, a surrogate pair above the BMP), so
// JSON written through a Writer decodes to exactly the values encoded.
package termsafe

import (
	"fmt"
	"io"
	"os"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Writer escapes what it is given before writing it to the underlying writer. Newline
// and tab are kept, being the layout of multi-line output; use Line for a text that
// must stay on one line. Each Write is escaped on its own: a rune split across two
// writes is shown as the escapes of its bytes, never written raw.
type Writer struct {
	w io.Writer
}

// NewWriter returns a Writer onto w. A w that already is a Writer is returned as is.
func NewWriter(w io.Writer) *Writer {
	if sw, ok := w.(*Writer); ok {
		return sw
	}
	return &Writer{w: w}
}

// Write writes p escaped. It reports len(p) when everything was written, as the
// escaped form is longer than p.
func (w *Writer) Write(p []byte) (int, error) {
	if safe(p, true) {
		return w.w.Write(p)
	}
	if _, err := w.w.Write(appendEscaped(nil, p, true)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap returns the underlying writer, for output that is data rather than text
// shown to a person (a downloaded file written to a pipe).
func (w *Writer) Unwrap() io.Writer { return w.w }

// Text returns s with every character escaped that Writer escapes; newline and tab are
// kept.
func Text(s string) string {
	if safe([]byte(s), true) {
		return s
	}
	return string(appendEscaped(nil, []byte(s), true))
}

// Line returns s escaped for one line of output (a file name, a table cell, a name):
// newline and tab are escaped too, so s cannot start a line of its own or shift the
// columns after it.
func Line(s string) string {
	if safe([]byte(s), false) {
		return s
	}
	return string(appendEscaped(nil, []byte(s), false))
}

// IsTerminal reports whether w is a terminal (a character device), seen through any
// Writer wrapping it.
func IsTerminal(w io.Writer) bool {
	if sw, ok := w.(*Writer); ok {
		w = sw.w
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Unsafe reports whether r is written escaped: a C0 control other than (with layout)
// newline and tab, DEL, a C1 control, a line or paragraph separator, or a format
// character (category Cf: bidi embeddings, overrides and isolates, zero-width spaces,
// the BOM, tag characters). ZERO WIDTH (NON-)JOINER are kept: scripts such as Persian
// and emoji sequences need them, and they cannot move or hide text.
func Unsafe(r rune, layout bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return !layout
	case r < 0x20 || r == 0x7f:
		return true
	case r < 0x80:
		return false
	case r < 0xa0:
		return true
	case r == 0x200c || r == 0x200d:
		return false
	case r == 0x2028 || r == 0x2029:
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// safe reports whether p is valid UTF-8 with nothing to escape.
func safe(p []byte, layout bool) bool {
	for i := 0; i < len(p); {
		c := p[i]
		if c < utf8.RuneSelf {
			if Unsafe(rune(c), layout) {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && n == 1 || Unsafe(r, layout) {
			return false
		}
		i += n
	}
	return true
}

func appendEscaped(dst, p []byte, layout bool) []byte {
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			dst = fmt.Appendf(dst, `\x%02x`, p[i])
		case !Unsafe(r, layout):
			dst = append(dst, p[i:i+n]...)
		case r == '\r':
			dst = append(dst, `\r`...)
		case r == '\n':
			dst = append(dst, `\n`...)
		case r == '\t':
			dst = append(dst, `\t`...)
		case r < 0x20:
			dst = fmt.Appendf(dst, `\x%02x`, r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			dst = fmt.Appendf(dst, `\u%04x\u%04x`, r1, r2)
		default:
			dst = fmt.Appendf(dst, `\u%04x`, r)
		}
		i += n
	}
	return dst
}
