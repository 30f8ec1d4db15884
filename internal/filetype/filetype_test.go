package filetype_test

import (
	"archive/zip"
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/filetype"
)

func zipOf(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for name, data := range files {
		f, err := w.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Sniff reads the kind from the content, whatever it is named: real files of this
// machine (the test's own executable, an ELF) and crafted headers of the others.
func TestSniff(t *testing.T) {
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	tar := make([]byte, 1024)
	copy(tar[257:], "ustar")
	cases := []struct {
		name    string
		content []byte
		want    string
	}{
		{"this test binary", self, filetype.ELF},
		{"a Windows program", append([]byte("MZ\x90\x00"), make([]byte, 60)...), filetype.PE},
		{"a Mach-O binary", []byte("\xcf\xfa\xed\xfe\x07\x00\x00\x01"), filetype.MachO},
		{"a universal binary", []byte("\xca\xfe\xba\xbe\x00\x00\x00\x02"), filetype.MachO},
		{"a Java class, same magic", []byte("\xca\xfe\xba\xbe\x00\x00\x00\x34"), filetype.Binary},
		{"a shell script", []byte("#!/bin/sh\nrm -rf /\n"), filetype.Script},
		{"a zip", zipOf(t, map[string][]byte{"a.txt": []byte("hi")}), filetype.Zip},
		{"gzip", []byte("\x1f\x8b\x08\x00"), filetype.Gzip},
		{"bzip2", []byte("BZh91AY"), filetype.Bzip2},
		{"xz", []byte("\xfd7zXZ\x00\x00"), filetype.XZ},
		{"zstd", []byte("\x28\xb5\x2f\xfd\x00"), filetype.Zstd},
		{"tar", tar, filetype.Tar},
		{"pdf", []byte("%PDF-1.7\n"), filetype.PDF},
		{"png", []byte("\x89PNG\r\n\x1a\n\x00"), filetype.PNG},
		{"jpeg", []byte("\xff\xd8\xff\xe0"), filetype.JPEG},
		{"gif", []byte("GIF89a"), filetype.GIF},
		{"webp", []byte("RIFF\x00\x00\x00\x00WEBPVP8 "), filetype.WebP},
		{"text", []byte("# Report\n\nAll good: ✓\n"), filetype.Text},
		{"text cut inside a rune", append(bytes.Repeat([]byte("a"), 8<<10-1), "✓"...), filetype.Text},
		{"binary", []byte{0, 1, 2, 3}, filetype.Binary},
		{"empty", nil, filetype.Unknown},
	}
	for _, c := range cases {
		if got := filetype.Sniff(c.content); got != c.want {
			t.Errorf("%s: %q; want %q", c.name, got, c.want)
		}
	}
}

// A name that claims another kind than the content is reported; a script may be named
// as text, and names that claim nothing match anything.
func TestMismatch(t *testing.T) {
	cases := []struct{ name, kind, want string }{
		{"report.pdf", filetype.ELF, "named .pdf but its content is elf"},
		{"REPORT.PDF", filetype.PDF, ""},
		{"notes.txt", filetype.PE, "named .txt but its content is pe"},
		{"run.py", filetype.Script, ""},
		{"data.bin", filetype.ELF, ""},
		{"empty.pdf", filetype.Unknown, ""},
	}
	for _, c := range cases {
		if got := filetype.Mismatch(c.name, c.kind); got != c.want {
			t.Errorf("Mismatch(%q, %q) = %q; want %q", c.name, c.kind, got, c.want)
		}
	}
}

// The executables inside a zip are found by their content, whatever they are named.
func TestZipExecutables(t *testing.T) {
	z := zipOf(t, map[string][]byte{
		"README.md":        []byte("# hi"),
		"bin/tool.txt":     append([]byte("\x7fELF"), make([]byte, 100)...),
		"scripts/setup.sh": []byte("#!/bin/sh\necho hi\n"),
		"docs/":            nil,
	})
	got := filetype.ZipExecutables(z, 10)
	if strings.Join(got, ",") != "bin/tool.txt,scripts/setup.sh" && strings.Join(got, ",") != "scripts/setup.sh,bin/tool.txt" {
		t.Fatalf("executables %v", got)
	}
	if got := filetype.ZipExecutables(z, 1); len(got) != 1 {
		t.Fatalf("at most 1: %v", got)
	}
	if got := filetype.ZipExecutables([]byte("not a zip"), 10); got != nil {
		t.Fatalf("not a zip: %v", got)
	}
}
