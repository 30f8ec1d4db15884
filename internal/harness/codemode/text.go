// Text helpers the generators share.

package codemode

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// clip cuts s to at most n bytes on a character boundary, marking the cut with "...".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// oneLine is s with every run of spaces and unprintable characters as one space,
// clipped to n bytes.
func oneLine(s string, n int) string {
	if len(s) > 4*n {
		s = s[:4*n]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || !unicode.IsPrint(r)
	}), " ")
	return clip(s, n)
}

// quote is s quoted for prose in a docstring or comment, which escape it again.
func quote(s string) string {
	return strconv.Quote(clip(s, maxIdent*2))
}
