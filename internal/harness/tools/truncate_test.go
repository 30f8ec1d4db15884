package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
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

// truncated splits a Truncate result into its head, the cut's size and its tail, by
// the offset and size its marker reports, and checks they put s back together.
func truncated(t *testing.T, s, out string) (head string, cut int, tail string) {
	t.Helper()
	m := markerRE.FindStringSubmatchIndex(out)
	if m == nil {
		t.Fatalf("no marker in the result")
	}
	cut, _ = strconv.Atoi(out[m[2]:m[3]])
	off, _ := strconv.Atoi(out[m[4]:m[5]])
	if m[0] != off {
		t.Fatalf("the marker says the head is %d bytes; it is %d", off, m[0])
	}
	head, tail = out[:off], out[m[1]:]
	if !strings.HasPrefix(s, head) || !strings.HasSuffix(s, tail) || len(head)+cut+len(tail) != len(s) {
		t.Fatalf("head (%d bytes), cut (%d) and tail (%d) do not make up the %d-byte output", len(head), cut, len(tail), len(s))
	}
	return head, cut, tail
}

var markerRE = regexp.MustCompile(`\n\[\.\.\. (\d+) bytes \(\d+ lines\) cut from the middle of this \d+-byte output; the full output is kept: call read_output with call_id "[^"]*" and offset (\d+) to read it \.\.\.\]\n`)

// Multi-byte text and binary output keep a head and a tail of about limit/2 bytes
// each: a cut moves back to a character start, at most 3 bytes, and never shrinks the
// head to a character (CJK) or to nothing (binary).
func TestTruncateKeepsHeadSizeOnMultibyteAndBinary(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 100<<10)
	for i := range random {
		random[i] = byte(rnd.UintN(256))
	}
	continuation := make([]byte, 100<<10) // the worst binary: no byte starts a character
	for i := range continuation {
		continuation[i] = 0x80 | byte(i%64)
	}
	cases := []struct {
		name, s string
	}{
		{"cjk", strings.Repeat("日本語の出力", 5000)},
		{"cjk-offset", "ab" + strings.Repeat("日本語の出力", 5000)},
		{"mixed", strings.Repeat("build 出力 ok; ", 5000)},
		{"mixed-dense", strings.Repeat("a日本b語", 8000)},
		{"emoji", strings.Repeat("😀", 10000)},
		{"emoji-mixed", strings.Repeat("x😀ab", 8000)},
		{"binary-random", string(random)},
		{"binary-continuation", string(continuation)},
	}
	for _, c := range cases {
		for _, limit := range []int{0, 1000, 1001, 4099} {
			t.Run(fmt.Sprintf("%s/%d", c.name, limit), func(t *testing.T) {
				out, cut := Truncate(c.s, limit, "c")
				if !cut {
					t.Fatal("not cut")
				}
				half := limit / 2
				if limit == 0 {
					half = DefaultLimit / 2
				}
				head, _, tail := truncated(t, c.s, out)
				if len(head) < half-3 || len(head) > half {
					t.Errorf("head %d bytes; want %d..%d", len(head), half-3, half)
				}
				if len(tail) < half || len(tail) > half+3 {
					t.Errorf("tail %d bytes; want %d..%d", len(tail), half, half+3)
				}
				if utf8.ValidString(c.s) && !utf8.ValidString(out) {
					t.Error("valid UTF-8 input cut inside a character")
				}
			})
		}
	}
}

// read_output pages never split a character, and paging from each page's end covers
// every byte exactly once, whatever the page length asked for; binary output pages
// the same way.
func TestReadOutputPagesOnCharacterBoundaries(t *testing.T) {
	ctx := context.Background()
	st := sessionStore(t)
	rnd := rand.New(rand.NewPCG(3, 4))
	random := make([]byte, 1000)
	for i := range random {
		random[i] = byte(rnd.UintN(256))
	}
	x := &Executor{Store: st}
	header := regexp.MustCompile(`^\[bytes (\d+)\.\.(\d+) of (\d+)\]\n`)
	for _, c := range []struct {
		name, s string
		lengths []int
	}{
		{"cjk", strings.Repeat("日本語の出力です。", 2000), []int{0, 1000, 1001}},
		{"mixed", strings.Repeat("ok 出力 😀 done\n", 1500), []int{0, 999, 5}},
		{"small-pages", "a日本😀b語" + strings.Repeat("é", 20) + strings.Repeat("日本語の出力", 20), []int{1, 2, 3, 4, 7}},
		{"binary", string(random), []int{1, 2, 3, 5, 1000}},
	} {
		if err := st.PutToolOutput(ctx, "s-1", c.name, []byte(c.s)); err != nil {
			t.Fatal(err)
		}
		for _, length := range c.lengths {
			var got strings.Builder
			for off, pages := 0, 0; off < len(c.s); pages++ {
				if pages > len(c.s) {
					t.Fatalf("%s/%d: paging does not progress", c.name, length)
				}
				args, _ := json.Marshal(map[string]any{"call_id": c.name, "offset": off, "length": length})
				res := x.Run(ctx, Call{SessionID: "s-1"}, model.ToolCall{ID: "r", Name: "read_output", Arguments: args})
				if res.IsError || res.Truncated {
					t.Fatalf("%s/%d at %d: %+v", c.name, length, off, res)
				}
				m := header.FindStringSubmatch(res.Text)
				if m == nil {
					t.Fatalf("%s/%d: no page header in %q", c.name, length, res.Text)
				}
				from, _ := strconv.Atoi(m[1])
				to, _ := strconv.Atoi(m[2])
				page := res.Text[len(m[0]):]
				if from != off || to <= from || len(page) != to-from {
					t.Fatalf("%s/%d: asked from %d, got bytes %d..%d (%d bytes)", c.name, length, off, from, to, len(page))
				}
				if utf8.ValidString(c.s) && !utf8.ValidString(page) {
					t.Fatalf("%s/%d: page %d..%d splits a character: it ends %q", c.name, length, from, to, page[max(0, len(page)-8):])
				}
				got.WriteString(page)
				off = to
			}
			if got.String() != c.s {
				t.Fatalf("%s/%d: the pages do not make up the output", c.name, length)
			}
		}
	}
	// An offset inside a character starts the page at that character.
	args, _ := json.Marshal(map[string]any{"call_id": "cjk", "offset": 4, "length": 6})
	res := x.Run(ctx, Call{SessionID: "s-1"}, model.ToolCall{ID: "r", Name: "read_output", Arguments: args})
	if res.Text != "[bytes 3..9 of 54000]\n本語" {
		t.Fatalf("read from inside a character: %q", res.Text)
	}
}

// sessionStore opens a store in a test directory, with session s-1.
func sessionStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateSession(context.Background(), store.Session{ID: "s-1", Agent: "a", Owner: "o"}); err != nil {
		t.Fatal(err)
	}
	return st
}
