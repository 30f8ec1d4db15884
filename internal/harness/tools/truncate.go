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
// keeps its first and last limit/2 bytes (cut on UTF-8 boundaries), with a marker in
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
	head := s[:half]
	for len(head) > 0 && !utf8.ValidString(head[max(0, len(head)-utf8.UTFMax):]) {
		head = head[:len(head)-1]
	}
	tailStart := len(s) - half
	for tailStart < len(s) && !utf8.RuneStart(s[tailStart]) {
		tailStart++
	}
	tail := s[tailStart:]
	cut := s[len(head):tailStart]
	marker := fmt.Sprintf("\n[... %d bytes (%d lines) cut from the middle of this %d-byte output; the full output is kept: call read_output with call_id %q and offset %d to read it ...]\n",
		len(cut), strings.Count(cut, "\n"), len(s), callID, len(head))
	return head + marker + tail, true
}
