package sessions_test

import (
	"archive/zip"
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sessions"
)

// An executable, or an archive holding one, is refused with the reason unless the
// operator allows executables; other content passes, its type said (and a name that
// lies about it reported).
func TestCheckType(t *testing.T) {
	elf := append([]byte("\x7fELF"), make([]byte, 64)...)
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	f, _ := zw.Create("tools/helper.dat")
	_, _ = f.Write(elf)
	_ = zw.Close()
	cases := []struct {
		name    string
		content []byte
		refused string // "" when it passes
		header  string
	}{
		{"report.pdf", []byte("%PDF-1.7\n..."), "", "pdf"},
		{"notes.txt", []byte("hello\n"), "", "text"},
		{"report.pdf", elf, "report.pdf is an executable (elf), named .pdf but its content is elf", "elf; named .pdf but its content is elf"},
		{"build.sh", []byte("#!/bin/sh\nmake\n"), "an executable (script)", "script"},
		{"bundle.zip", zbuf.Bytes(), "a zip archive holding executables (tools/helper.dat)", "zip"},
		{"logs.tar.xz", []byte("\xfd7zXZ\x00\x00rest"), "whose entries could not be checked", "xz"},
	}
	for _, c := range cases {
		got, err := sessions.CheckType(c.name, c.content, false)
		if got.Header() != c.header {
			t.Errorf("%s: header %q; want %q", c.name, got.Header(), c.header)
		}
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.refused != "" && (!errors.Is(err, sessions.ErrExecutable) || !strings.Contains(err.Error(), c.refused) || !strings.Contains(err.Error(), "build and signing pipeline")):
			t.Errorf("%s: %v; want ErrExecutable saying %q", c.name, err, c.refused)
		}
		if _, err := sessions.CheckType(c.name, c.content, true); err != nil {
			t.Errorf("%s with executables allowed: %v", c.name, err)
		}
	}
}

// TypeChecks answers as CheckType does, under any name, and keeps at most Max digests.
func TestTypeChecksKeepsWhatItRead(t *testing.T) {
	tc := sessions.TypeChecks{Max: 2}
	elf := []byte("\x7fELF\x02\x01\x01\x00rest")
	for _, name := range []string{"a.bin", "report.pdf"} {
		want, wantErr := sessions.CheckType(name, elf, false)
		got, err := tc.Check(name, "sum-elf", elf, false)
		if got.Header() != want.Header() || !errors.Is(err, sessions.ErrExecutable) || err.Error() != wantErr.Error() {
			t.Fatalf("%s: %+v %v; want %+v %v", name, got, err, want, wantErr)
		}
	}
	if c, err := tc.Check("a.bin", "sum-elf", elf, true); err != nil || c.Kind != "elf" {
		t.Fatalf("allowed: %+v %v", c, err)
	}
	// The kept answer is the digest's: other bytes under a kept digest are not read
	// again (callers pass the digest of what they hand out), and an evicted one is.
	if c, _ := tc.Check("x.txt", "sum-elf", []byte("text"), true); c.Kind != "elf" {
		t.Fatalf("not kept: %+v", c)
	}
	_, _ = tc.Check("b.txt", "sum-b", []byte("b"), false)
	_, _ = tc.Check("c.txt", "sum-c", []byte("c"), false)
	if c, _ := tc.Check("x.txt", "sum-elf", []byte("text"), true); c.Kind != "text" {
		t.Fatalf("the oldest digest was not forgotten: %+v", c)
	}
}
