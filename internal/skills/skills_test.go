package skills

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const skillMD = "---\nname: pdf\ndescription: Extract text and tables from PDF files.\n---\n\n# PDF\n\nRun scripts/extract.sh FILE.\n"

// writeSkill makes a skill folder from path -> content; a path ending in "*" is made
// executable (the star is dropped).
func writeSkill(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, "*") {
			p, mode = strings.TrimSuffix(p, "*"), 0o755
		}
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func pdfSkill(t *testing.T) string {
	return writeSkill(t, map[string]string{"SKILL.md": skillMD, "scripts/extract.sh*": "#!/bin/sh\necho extracted\n", "reference/forms.md": "forms"})
}

func TestReadSkill(t *testing.T) {
	b, err := Read(pdfSkill(t))
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "pdf" || b.Description != "Extract text and tables from PDF files." {
		t.Fatalf("name %q description %q", b.Name, b.Description)
	}
	var paths []string
	for _, f := range b.Files {
		paths = append(paths, f.Path)
		if f.Executable != (f.Path == "scripts/extract.sh") {
			t.Errorf("%s executable = %v", f.Path, f.Executable)
		}
	}
	if got := strings.Join(paths, ","); got != "SKILL.md,reference/forms.md,scripts/extract.sh" {
		t.Fatalf("files %s", got)
	}
	if !strings.HasPrefix(b.Digest, "sha256:") || len(b.Digest) != 71 || b.Digest != Digest(b.Encoded) {
		t.Fatalf("digest %q", b.Digest)
	}
	want := header + "f 644 " + itoa(len(skillMD)) + " SKILL.md\n" + skillMD + "\n" +
		"f 644 5 reference/forms.md\nforms\n" +
		"f 755 25 scripts/extract.sh\n#!/bin/sh\necho extracted\n\n"
	if string(b.Encoded) != want {
		t.Fatalf("encoding\n%q\nwant\n%q", b.Encoded, want)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// matches reports whether s matches the regular expression pattern.
func matches(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

// The digest is the folder's paths, executable bits and contents: not times, other mode
// bits or where the folder is. Any of the three changing changes it.
func TestDigestCoversPathModeContent(t *testing.T) {
	a, b := pdfSkill(t), pdfSkill(t)
	past := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(filepath.Join(b, "SKILL.md"), past, past); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(b, "reference/forms.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(b, "scripts/extract.sh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(b, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	digest := func(dir string) string {
		t.Helper()
		bd, err := Read(dir)
		if err != nil {
			t.Fatal(err)
		}
		return bd.Digest
	}
	base := digest(a)
	if got := digest(b); got != base {
		t.Fatalf("same paths, executable bits and contents: %s vs %s", got, base)
	}
	for name, change := range map[string]func(dir string) error{
		"content": func(d string) error {
			return os.WriteFile(filepath.Join(d, "reference/forms.md"), []byte("Forms"), 0o644)
		},
		"executable bit": func(d string) error { return os.Chmod(filepath.Join(d, "reference/forms.md"), 0o755) },
		"path":           func(d string) error { return os.Rename(filepath.Join(d, "reference"), filepath.Join(d, "refs")) },
		"new file":       func(d string) error { return os.WriteFile(filepath.Join(d, "x"), nil, 0o644) },
	} {
		d := pdfSkill(t)
		if err := change(d); err != nil {
			t.Fatal(err)
		}
		if got := digest(d); got == base {
			t.Errorf("changing the %s left the digest as it was", name)
		}
	}
}

// Each bad folder is refused with a title, the file, and what to do.
func TestReadRefusesBadFolders(t *testing.T) {
	big := strings.Repeat("x", MaxBytes)
	cases := []struct {
		name    string
		setup   func(t *testing.T) string
		summary string
		file    string
		detail  string
	}{
		{"missing folder", func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope") }, "Skill Folder Not Found", "", "does not exist"},
		{"a file", func(t *testing.T) string { return filepath.Join(pdfSkill(t), "SKILL.md") }, "Skill Folder Is Not A Folder", "", "is a file"},
		{"no SKILL.md", func(t *testing.T) string { return writeSkill(t, map[string]string{"README.md": "x"}) }, "Missing SKILL.md", "SKILL.md", "has no SKILL.md"},
		{"SKILL.md lower case", func(t *testing.T) string { return writeSkill(t, map[string]string{"skill.md": skillMD}) }, "Missing SKILL.md", "SKILL.md", "has no SKILL.md"},
		{"no front matter", func(t *testing.T) string { return writeSkill(t, map[string]string{"SKILL.md": "# PDF\n"}) }, "Invalid SKILL.md", "SKILL.md", "does not start with front matter"},
		{"unclosed", func(t *testing.T) string { return writeSkill(t, map[string]string{"SKILL.md": "---\nname: pdf\n"}) }, "Invalid SKILL.md", "SKILL.md", "never closed"},
		{"no name", func(t *testing.T) string {
			return writeSkill(t, map[string]string{"SKILL.md": "---\ndescription: d\n---\n"})
		}, "Invalid SKILL.md", "SKILL.md", "has no name"},
		{"no description", func(t *testing.T) string {
			return writeSkill(t, map[string]string{"SKILL.md": "---\nname: pdf\n---\n"})
		}, "Invalid SKILL.md", "SKILL.md", "has no description"},
		{"bad name", func(t *testing.T) string {
			return writeSkill(t, map[string]string{"SKILL.md": "---\nname: PDF Tools\ndescription: d\n---\n"})
		}, "Invalid SKILL.md", "SKILL.md", `"PDF Tools", which is not a valid skill name`},
		{"long description", func(t *testing.T) string {
			return writeSkill(t, map[string]string{"SKILL.md": "---\nname: pdf\ndescription: " + strings.Repeat("d", MaxDescriptionChars+1) + "\n---\n"})
		}, "Invalid SKILL.md", "SKILL.md", "description of 1025 characters"},
		{"symlink inside", func(t *testing.T) string {
			d := pdfSkill(t)
			must(t, os.Symlink("/etc/passwd", filepath.Join(d, "scripts/passwd")))
			return d
		}, "Symlink In Skill Folder", "scripts/passwd", `scripts/passwd in skill folder .* is a symlink \(to "/etc/passwd"\)`},
		{"symlink within the folder", func(t *testing.T) string {
			d := pdfSkill(t)
			must(t, os.Symlink("reference", filepath.Join(d, "refs")))
			return d
		}, "Symlink In Skill Folder", "refs", "is a symlink"},
		{"fifo", func(t *testing.T) string {
			d := pdfSkill(t)
			must(t, syscall.Mkfifo(filepath.Join(d, "pipe"), 0o644))
			return d
		}, "Special File In Skill Folder", "pipe", "not a regular file"},
		{"too large", func(t *testing.T) string {
			return writeSkill(t, map[string]string{"SKILL.md": skillMD, "data.bin": big})
		}, "Skill Folder Too Large", "data.bin", "larger than 1048576 bytes"},
		{"SKILL.md too large", func(t *testing.T) string {
			return writeSkill(t, map[string]string{"SKILL.md": skillMD + strings.Repeat("x", MaxSkillMDBytes)})
		}, "Skill Folder Too Large", "SKILL.md", "the limit is 65536 bytes"},
		{"too many files", func(t *testing.T) string {
			files := map[string]string{"SKILL.md": skillMD}
			for i := range MaxFiles {
				files["f/"+itoa(i)] = ""
			}
			return writeSkill(t, files)
		}, "Skill Folder Too Large", "", "more than 512 files"},
		{"too deep", func(t *testing.T) string {
			return writeSkill(t, map[string]string{"SKILL.md": skillMD, "a/b/c/d/e/f/g/h/i.txt": ""})
		}, "Invalid File Name In Skill Folder", "a/b/c/d/e/f/g/h/i.txt", "levels deep"},
		{"control character", func(t *testing.T) string {
			return writeSkill(t, map[string]string{"SKILL.md": skillMD, "bad\x1bname": ""})
		},
			"Invalid File Name In Skill Folder", "bad\x1bname", "control character"},
		{"backslash", func(t *testing.T) string { return writeSkill(t, map[string]string{"SKILL.md": skillMD, `a\b`: ""}) },
			"Invalid File Name In Skill Folder", `a\b`, "backslash"},
		{"not UTF-8", func(t *testing.T) string { return writeSkill(t, map[string]string{"SKILL.md": skillMD, "caf\xe9": ""}) },
			"Invalid File Name In Skill Folder", "caf?", "not valid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(c.setup(t))
			var p *Problem
			if !errors.As(err, &p) {
				t.Fatalf("got %v; want a *Problem", err)
			}
			if p.Summary != c.summary || (c.file != "" && p.File != c.file) || p.Fix == "" {
				t.Fatalf("problem %+v; want summary %q, file %q and a fix", p, c.summary, c.file)
			}
			if !matches(c.detail, p.Detail) {
				t.Fatalf("detail %q does not match %q", p.Detail, c.detail)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCheckPathRefusesEscapes(t *testing.T) {
	// Linux refuses names over 255 bytes itself, so only CheckPath can be shown one.
	for _, p := range []string{"../x", "a/../../x", "/etc/passwd", "a//b", "./a", "", strings.Repeat("n", 256), "a/" + strings.Repeat("é", 128)} {
		if CheckPath(p) == nil {
			t.Errorf("%q passed", p)
		}
	}
	for _, p := range []string{"SKILL.md", "scripts/run.sh", "dir with space/ünïcode.md", ".hidden"} {
		if prob := CheckPath(p); prob != nil {
			t.Errorf("%q refused: %v", p, prob)
		}
	}
}

// What Read encodes, Decode reads back; content that does not hash to its digest, or that
// breaks a rule, is refused.
func TestDecode(t *testing.T) {
	b, err := Read(pdfSkill(t))
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(b.Encoded, b.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if back.Name != b.Name || back.Description != b.Description || back.Digest != b.Digest || len(back.Files) != len(b.Files) {
		t.Fatalf("decoded %+v", back)
	}
	for i := range b.Files {
		if back.Files[i].Path != b.Files[i].Path || back.Files[i].Executable != b.Files[i].Executable || string(back.Files[i].Content) != string(b.Files[i].Content) {
			t.Fatalf("file %d: %+v vs %+v", i, back.Files[i], b.Files[i])
		}
	}
	tampered := append([]byte{}, b.Encoded...)
	tampered[len(tampered)-2] ^= 1
	if _, err := Decode(tampered, b.Digest); err == nil || !strings.Contains(err.Error(), "hashes to") {
		t.Fatalf("tampered content: %v", err)
	}
	for name, files := range map[string][]File{
		"escape":    {{Path: "../../etc/cron.d/x", Content: []byte("x")}, {Path: "SKILL.md", Content: []byte(skillMD)}},
		"unsorted":  {{Path: "b"}, {Path: "SKILL.md", Content: []byte(skillMD)}},
		"no SKILL":  {{Path: "a"}},
		"absolute":  {{Path: "/abs"}, {Path: "SKILL.md", Content: []byte(skillMD)}},
		"duplicate": {{Path: "SKILL.md", Content: []byte(skillMD)}, {Path: "SKILL.md", Content: []byte(skillMD)}},
	} {
		enc := Encode(files)
		if _, err := Decode(enc, Digest(enc)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	for name, enc := range map[string]string{
		"no header":     "f 644 1 a\nx\n",
		"short content": header + "f 644 10 SKILL.md\nabc\n",
		"bad size":      header + "f 644 +1 SKILL.md\nabc\n",
		"bad mode":      header + "f 777 1 SKILL.md\nx\n",
	} {
		if _, err := Decode([]byte(enc), Digest([]byte(enc))); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestFrontMatter(t *testing.T) {
	for _, c := range []struct{ md, name, desc string }{
		{"---\nname: pdf\ndescription: Plain text.\n---\n", "pdf", "Plain text."},
		{"\ufeff---\r\nname: pdf\r\ndescription: CRLF.\r\n---\r\n", "pdf", "CRLF."},
		{"---\nname: \"pdf\"\ndescription: 'It''s quoted: yes'\n---\n", "pdf", "It's quoted: yes"},
		{"---\nname: pdf\ndescription: \"Tab\\tand \\u00e9\" # note\n---\n", "pdf", "Tab\tand é"},
		{"---\nname: pdf # the name\ndescription: Folded\n  over two lines.\n---\n", "pdf", "Folded over two lines."},
		{"---\nname: pdf\ndescription: >-\n  Folded block\n  scalar.\n---\n", "pdf", "Folded block scalar."},
		{"---\nname: pdf\ndescription: |\n  Line one\n  Line two\n---\n", "pdf", "Line one\nLine two"},
		{"---\n# comment\nlicense: MIT\nmetadata:\n  version: 1\n  name: nested-ignored\nname: pdf\nallowed-tools: [Bash]\ndescription: d\n---\n", "pdf", "d"},
	} {
		fm, err := parseFrontMatter([]byte(c.md))
		if err != nil || fm.name != c.name || fm.description != c.desc {
			t.Errorf("%q: %+v, %v; want %q / %q", c.md, fm, err, c.name, c.desc)
		}
	}
	for _, md := range []string{
		"---\nname: pdf\nname: other\ndescription: d\n---\n",
		"---\nname: [pdf]\ndescription: d\n---\n",
		"---\nname: pdf\ndescription: \"unclosed\n---\n",
		"---\nname: pdf\ndescription:\n  nested: map\n---\n",
		"---\n- a list\n---\n",
	} {
		if fm, err := parseFrontMatter([]byte(md)); err == nil {
			t.Errorf("%q: read as %+v", md, fm)
		}
	}
}

// The skill the documentation's example publishes is a valid one.
func TestExampleSkillIsValid(t *testing.T) {
	b, err := Read("../../examples/resources/trueforge_agent/skills/pytest")
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "pytest" || len(b.Files) != 2 || !b.Files[1].Executable {
		t.Fatalf("example skill %+v", b)
	}
}
