package filetype_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"slices"
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

func tarOf(t *testing.T, files map[string][]byte, mode int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for name, data := range files {
		if err := w.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The executables inside an archive are found by their content (or an executable bit),
// whatever they are named, in zip, tar and tar.gz; archives it cannot read through say
// so rather than passing as clean.
func TestArchiveExecutables(t *testing.T) {
	elf := append([]byte("\x7fELF"), make([]byte, 100)...)
	files := map[string][]byte{"README.md": []byte("# hi"), "bin/tool.txt": elf, "scripts/setup.sh": []byte("#!/bin/sh\necho hi\n")}
	want := "bin/tool.txt,scripts/setup.sh"
	for _, c := range []struct {
		name    string
		content []byte
	}{
		{"zip", zipOf(t, files)},
		{"tar", tarOf(t, files, 0o644)},
		{"tar.gz", gz(t, tarOf(t, files, 0o644))},
	} {
		kind := filetype.Sniff(c.content)
		got, err := filetype.ArchiveExecutables(c.content, kind, 10)
		slices.Sort(got)
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("%s (%s): %v, %v; want %s", c.name, kind, got, err, want)
		}
	}
	if got, _ := filetype.ArchiveExecutables(tarOf(t, map[string][]byte{"run": []byte("echo hi")}, 0o755), filetype.Tar, 10); len(got) != 1 {
		t.Errorf("an entry with an executable bit: %v", got)
	}
	if got, _ := filetype.ArchiveExecutables(gz(t, elf), filetype.Gzip, 10); len(got) != 1 {
		t.Errorf("a gzipped executable: %v", got)
	}
	if got, err := filetype.ArchiveExecutables(gz(t, []byte("just text")), filetype.Gzip, 10); len(got) != 0 || err != nil {
		t.Errorf("gzipped text: %v %v", got, err)
	}
	if _, err := filetype.ArchiveExecutables([]byte("\xfd7zXZ\x00..."), filetype.XZ, 10); !errors.Is(err, filetype.ErrNotInspected) {
		t.Errorf("xz: %v; want ErrNotInspected", err)
	}
	if _, err := filetype.ArchiveExecutables([]byte("PK\x03\x04 broken"), filetype.Zip, 10); !errors.Is(err, filetype.ErrNotInspected) {
		t.Errorf("a broken zip: %v; want ErrNotInspected", err)
	}
	if got, err := filetype.ArchiveExecutables([]byte("%PDF-1.7"), filetype.PDF, 10); got != nil || err != nil {
		t.Errorf("a pdf is no archive: %v %v", got, err)
	}
}
