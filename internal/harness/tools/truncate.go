package tools

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// DefaultLimit is how many bytes of a tool result reach the model (head and tail
// halves), 16 KiB: the floor coder/coder settled on for tool results, small enough for
// small-context local models, large enough for a typical build log's ends.
const DefaultLimit = 16 << 10

// Truncate is the one choke point every tool result passes: a result over limit bytes
// keeps its first and last limit/2 bytes (each cut moved back to the start of the
// character it would split, at most 3 bytes, see runeBoundary), with a marker in
// between saying how much was cut and how to fetch the rest with read_output. It
// reports whether it cut.
func Truncate(s string, limit int, callID string) (string, bool) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	if len(s) <= limit {
		return s, false
	}
	half := limit / 2
	head := s[:runeBoundary(s, half)]
	tailStart := max(runeBoundary(s, len(s)-half), len(head))
	tail := s[tailStart:]
	cut := s[len(head):tailStart]
	marker := fmt.Sprintf("\n[... %d bytes (%d lines) cut from the middle of this %d-byte output; the full output is kept: call read_output with call_id %q and offset %d to read it ...]\n",
		len(cut), strings.Count(cut, "\n"), len(s), callID, len(head))
	return head + marker + tail, true
}

// runeBoundary moves a cut at byte i of s back to the start of the character it would
// split, by at most utf8.UTFMax-1 bytes. Where no character starts that close (not
// UTF-8: binary output) the cut stays at i, so a cut costs at most 3 bytes whatever s
// holds. A cut it returns is returned unchanged, so pages cut with it tile the text:
// a page ending at a boundary is followed by one starting at the same boundary.
func runeBoundary[T ~string | ~[]byte](s T, i int) int {
	if i <= 0 || i >= len(s) {
		return max(0, min(i, len(s)))
	}
	for j := i; j >= 0 && j > i-utf8.UTFMax; j-- {
		if utf8.RuneStart(s[j]) {
			return j
		}
	}
	return i
}
