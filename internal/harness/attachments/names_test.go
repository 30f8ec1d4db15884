package attachments

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func TestSafeName(t *testing.T) {
	for in, want := range map[string]string{
		"report.pdf":                    "report.pdf",
		"../../etc/passwd":              "passwd",
		`C:\Users\me\notes.txt`:         "notes.txt",
		"a\nb\x00c.txt":                 "a_b_c.txt",
		".bashrc":                       "bashrc",
		"-rf.txt":                       "rf.txt",
		"$(rm -rf ~).sh":                "__rm -rf __.sh",
		"x\xff\xfey.bin":                "x__y.bin",
		"caf\u00e9 \u202enoitpircs.txt": "caf\u00e9 _noitpircs.txt",
	} {
		got, err := SafeName(in)
		if err != nil || got != want {
			t.Errorf("SafeName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	long, err := SafeName(strings.Repeat("\u00e9", 200) + ".tar.gz")
	if err != nil || len(long) > maxNameBytes || !strings.HasSuffix(long, ".tar.gz") || !utf8.ValidString(long) {
		t.Errorf("a long name: %q (%d bytes), %v", long, len(long), err)
	}
	for _, bad := range []string{"", "..", "../", "\n\t", "___", "/"} {
		if _, err := SafeName(bad); !errors.Is(err, ErrBadName) {
			t.Errorf("SafeName(%q): %v, want ErrBadName", bad, err)
		}
	}
}

func TestUniqueName(t *testing.T) {
	existing := []store.Attachment{{Name: "a.tar.gz"}, {Name: "a-2.tar.gz"}, {Name: "b"}}
	for in, want := range map[string]string{"a.tar.gz": "a-3.tar.gz", "b": "b-2", "c.txt": "c.txt"} {
		if got := uniqueName(in, existing); got != want {
			t.Errorf("uniqueName(%q) = %q, want %q", in, got, want)
		}
	}
}
