package archive_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/archive"
	"github.com/trueforge/terraform-provider-trueforge/internal/archive/archivetest"
)

// made is what a walk handed to its callback, by name.
type made map[string]archive.Entry

// walk runs archive.Walk on b under p, keeping each accepted entry (a file's content in
// its Target field, for comparing).
func walk(t *testing.T, b []byte, p archive.Policy) (made, *archive.Report) {
	t.Helper()
	got := made{}
	rep, err := archive.Walk(b, p, func(e archive.Entry) error {
		if e.Kind == archive.File {
			body, err := io.ReadAll(e.Content)
			if err != nil {
				return err
			}
			e.Target, e.Content = string(body), nil
		}
		got[e.Name] = e
		return nil
	})
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}
	return got, rep
}

// skipped is the reason the report gives for entry name, "" when it was not skipped.
func skipped(rep *archive.Report, name string) string {
	for _, s := range rep.Skipped {
		if s.Name == name {
			return s.Reason
		}
	}
	return ""
}

// tree is a normal tree, with one of each kind a format can hold.
func tree(withHardLink bool) []archivetest.Entry {
	es := []archivetest.Entry{
		archivetest.Dir("src/"),
		archivetest.File("src/main.go", "package main\n"),
		{Name: "src/run.sh", Body: "#!/bin/sh\necho hi\n", Mode: 0o755},
		archivetest.File("src/deep/er/data.csv", "a,b\n1,2\n"),
		archivetest.Symlink("src/latest", "deep/er/data.csv"),
		archivetest.Symlink("top", "src"),
		archivetest.Dir("empty/"),
	}
	if withHardLink {
		es = append(es, archivetest.HardLink("src/copy.go", "src/main.go"))
	}
	return es
}

// Every format reads back the tree it was made from, told by its bytes.
func TestFormatsRoundTrip(t *testing.T) {
	formats := map[archive.Format]func() []byte{
		archive.Zip:      func() []byte { return archivetest.Zip(t, tree(false)...) },
		archive.Tar:      func() []byte { return archivetest.TarBytes(t, tree(true)...) },
		archive.TarGzip:  func() []byte { return archivetest.Compressed(t, archivetest.Gzip, tree(true)...) },
		archive.TarBzip2: func() []byte { return archivetest.Compressed(t, archivetest.Bzip2, tree(true)...) },
		archive.TarXZ:    func() []byte { return archivetest.Compressed(t, archivetest.XZ, tree(true)...) },
		archive.TarZstd:  func() []byte { return archivetest.Compressed(t, archivetest.Zstd, tree(true)...) },
	}
	for f, build := range formats {
		t.Run(string(f), func(t *testing.T) {
			got, rep := walk(t, build(), archive.Policy{})
			if rep.Format != f || rep.Stopped != nil || len(rep.Skipped) != 0 {
				t.Fatalf("format %s, stopped %+v, skipped %+v", rep.Format, rep.Stopped, rep.Skipped)
			}
			want := map[string]string{"src/main.go": "package main\n", "src/run.sh": "#!/bin/sh\necho hi\n", "src/deep/er/data.csv": "a,b\n1,2\n",
				"src/latest": "deep/er/data.csv", "top": "src"}
			for name, body := range want {
				if got[name].Target != body {
					t.Errorf("%s: %q, want %q", name, got[name].Target, body)
				}
			}
			if got["src/run.sh"].Mode != 0o755 || got["src/main.go"].Mode != 0o644 || got["src/latest"].Kind != archive.Symlink ||
				got["src"].Kind != archive.Dir || got["empty"].Kind != archive.Dir {
				t.Errorf("kinds and modes: %+v", got)
			}
			if f != archive.Zip {
				if h := got["src/copy.go"]; h.Kind != archive.HardLink || h.Target != "src/main.go" || h.Size != int64(len("package main\n")) {
					t.Errorf("hard link: %+v", h)
				}
			}
			if rep.Files != 3 || rep.Symlinks != 2 || rep.Bytes < 30 || rep.Compressed == 0 {
				t.Errorf("report %+v", rep)
			}
		})
	}
}

// Each hostile entry is skipped with its reason, in tar and in zip alike, and never
// reaches the callback; what is fine beside it is extracted.
func TestRefusals(t *testing.T) {
	cases := []struct {
		name    string
		entries []archivetest.Entry
		skipped map[string]string // entry -> part of its reason
		made    []string
	}{
		{"zip slip", []archivetest.Entry{archivetest.File("../../evil", "x"), archivetest.File("a/../../evil2", "x"), archivetest.File("ok", "y")},
			map[string]string{"../../evil": `".." component`, "a/../../evil2": `".." component`}, []string{"ok"}},
		{"absolute path", []archivetest.Entry{archivetest.File("/etc/evil", "x"), archivetest.File("/tmp/evil", "x")},
			map[string]string{"/etc/evil": "absolute path", "/tmp/evil": "absolute path"}, nil},
		{"symlink to an absolute path, then a file through it",
			[]archivetest.Entry{archivetest.Symlink("link", "/etc"), archivetest.File("link/passwd", "root::0:0::/:/bin/sh\n")},
			map[string]string{"link": "absolute path outside the destination", "link/passwd": "through a symlink"}, nil},
		{"symlink out by ..", []archivetest.Entry{archivetest.Symlink("link", "../../x"), archivetest.Symlink("d/up", "../..")},
			map[string]string{"link": "leads out of the destination", "d/up": "leads out of the destination"}, nil},
		{"file through an accepted symlink", []archivetest.Entry{archivetest.Dir("d/"), archivetest.Symlink("ok", "d"), archivetest.File("ok/x", "x")},
			map[string]string{"ok/x": "through a symlink: ok is a symbolic link"}, []string{"d", "ok"}},
		{"symlink chain out: a link to . then a target through it", []archivetest.Entry{archivetest.Symlink("s", "."), archivetest.Symlink("x", "s/../y")},
			map[string]string{"x": "goes through s, a symbolic link"}, []string{"s"}},
		{"symlink made later where a target went through", []archivetest.Entry{archivetest.Symlink("x", "s/../y"), archivetest.Symlink("s", ".")},
			map[string]string{"s": "would redirect it"}, []string{"x"}},
		{"hard link out", []archivetest.Entry{archivetest.HardLink("h1", "../../etc/passwd"), archivetest.HardLink("h2", "/etc/passwd"),
			archivetest.HardLink("h3", "later"), archivetest.File("later", "x")},
			map[string]string{"h1": "outside the destination", "h2": "outside the destination", "h3": "not a file this archive extracted before it"}, []string{"later"}},
		{"devices and FIFOs", []archivetest.Entry{{Name: "null", Type: tar.TypeChar, Mode: 0o666}, {Name: "sda", Type: tar.TypeBlock, Mode: 0o660},
			{Name: "pipe", Type: tar.TypeFifo, Mode: 0o644}},
			map[string]string{"null": "character device", "sda": "block device", "pipe": "FIFO"}, nil},
		{"control characters and look-alikes", []archivetest.Entry{archivetest.File("red\x1b[31m", "x"), archivetest.File("two\nlines", "x"),
			archivetest.File("report\u202egpj.exe", "x"), archivetest.File("bad\xffutf8", "x"), archivetest.File(`..\..\win`, "x")},
			map[string]string{`"red\x1b[31m"`: "control character", `"two\nlines"`: "control character", `"report\u202egpj.exe"`: "bidirectional",
				`"bad\xffutf8"`: "not valid UTF-8", `..\..\win`: "backslash"}, nil},
		{"a name twice", []archivetest.Entry{archivetest.File("a", "first"), archivetest.Symlink("a", "/etc/passwd"), archivetest.File("a", "third")},
			map[string]string{"a": "appears earlier"}, []string{"a"}},
	}
	for _, c := range cases {
		for _, format := range []string{"tar", "zip"} {
			t.Run(c.name+"/"+format, func(t *testing.T) {
				var b []byte
				if format == "zip" {
					if hasHardLink(c.entries) {
						t.Skip("zip has no hard links")
					}
					b = archivetest.Zip(t, c.entries...)
				} else {
					b = archivetest.TarBytes(t, c.entries...)
				}
				got, rep := walk(t, b, archive.Policy{})
				for name, reason := range c.skipped {
					if r := skipped(rep, name); !strings.Contains(r, reason) {
						t.Errorf("%s: skipped for %q, want %q (skipped: %+v)", name, r, reason, rep.Skipped)
					}
				}
				for name := range got {
					if !contains(c.made, name) {
						t.Errorf("%s was created: %+v", name, got[name])
					}
				}
				for _, name := range c.made {
					if _, ok := got[name]; !ok {
						t.Errorf("%s was not created (skipped: %+v)", name, rep.Skipped)
					}
				}
				if a, ok := got["a"]; ok && a.Target != "first" {
					t.Errorf("the first of a name twice is kept: %+v", a)
				}
			})
		}
	}
}

func hasHardLink(es []archivetest.Entry) bool {
	for _, e := range es {
		if e.Type == tar.TypeLink {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A set-user-ID, set-group-ID or sticky file is extracted without the bits, and the
// report says which were dropped.
func TestSetuidStripped(t *testing.T) {
	for _, b := range [][]byte{
		archivetest.TarBytes(t, archivetest.Entry{Name: "su", Body: "#!/bin/sh\n", Mode: 0o755 | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky}),
		archivetest.Zip(t, archivetest.Entry{Name: "su", Body: "#!/bin/sh\n", Mode: 0o755 | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky}),
	} {
		got, _ := walk(t, b, archive.Policy{})
		su := got["su"]
		if su.Mode != 0o755 || su.Stripped != fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky {
			t.Fatalf("su: mode %v, stripped %v", su.Mode, su.Stripped)
		}
	}
}

// Past MaxEntries the walk stops: a tar says "more than N", a zip how many were not
// looked at, and archive/zip is never given more than N directory records.
func TestTooManyEntries(t *testing.T) {
	var es []archivetest.Entry
	for i := range 12 {
		es = append(es, archivetest.File(fmt.Sprintf("f%02d", i), "x"))
	}
	p := archive.Policy{MaxEntries: 10}
	got, rep := walk(t, archivetest.TarBytes(t, es...), p)
	if len(got) != 10 || rep.Stopped == nil || rep.Stopped.Limit != "max_entries" || !strings.Contains(rep.Stopped.Reason, "more than 10 entries") {
		t.Fatalf("tar: %d made, stopped %+v", len(got), rep.Stopped)
	}
	got, rep = walk(t, archivetest.Zip(t, es...), p)
	if len(got) != 10 || rep.Stopped == nil || rep.Stopped.Limit != "max_entries" || rep.NotLookedAt != 2 || !strings.Contains(rep.Stopped.Reason, "the last 2 were not looked at") {
		t.Fatalf("zip: %d made, stopped %+v, not looked at %d", len(got), rep.Stopped, rep.NotLookedAt)
	}
}

// manyZip is a zip of n empty stored entries, made once.
var manyZip = sync.OnceValue(func() []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for i := range 70_000 {
		if _, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("e%05d", i), Method: zip.Store}); err != nil {
			panic(err)
		}
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
})

// A zip with more records than a uint16 counts (a zip64 end record) is cut at the
// limit, below and above 65535, and read whole within it.
func TestZipDirectoryCut(t *testing.T) {
	for _, limit := range []int{5, 65_535, 66_000, 100_000} {
		n := 0
		rep, err := archive.Walk(manyZip(), archive.Policy{MaxEntries: limit}, func(archive.Entry) error { n++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		want := min(limit, 70_000)
		if n != want || (limit < 70_000) != (rep.Stopped != nil) || (limit < 70_000 && rep.NotLookedAt != 70_000-limit) {
			t.Fatalf("limit %d: %d entries, want %d; stopped %+v, not looked at %d", limit, n, want, rep.Stopped, rep.NotLookedAt)
		}
	}
}

// bomb is a tar.zst of one GiB of zeros, made once.
var bomb = sync.OnceValue(func() []byte { return archivetest.Bomb(&testing.T{}, "zeros.bin", 1<<30) })

// A 10,000-to-1 bomb stops at the ratio limit, after decompressing no more than the
// grace and one buffer, quickly and in little memory; with the ratio raised it stops at
// max_bytes instead, no further.
func TestRatioBomb(t *testing.T) {
	b := bomb()
	if ratio := float64(1<<30) / float64(len(b)); ratio < 10_000 {
		t.Fatalf("the bomb is only %.0f to 1", ratio)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	got, rep := walkDiscard(t, b, archive.Policy{})
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if rep.Stopped == nil || rep.Stopped.Limit != "max_ratio" || rep.Stopped.Entry != "zeros.bin" || !rep.Stopped.Partial || got != 0 {
		t.Fatalf("stopped %+v, %d files made", rep.Stopped, got)
	}
	if rep.Unpacked > 8<<20 {
		t.Errorf("decompressed %d bytes before stopping, want at most a few MiB", rep.Unpacked)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("allocated %d bytes", alloc)
	}
	if took > 5*time.Second {
		t.Errorf("took %v", took)
	}
	_, rep = walkDiscard(t, b, archive.Policy{MaxRatio: 1e9, MaxBytes: 64 << 20})
	if rep.Stopped == nil || rep.Stopped.Limit != "max_bytes" || rep.Unpacked > 64<<20+1<<20 {
		t.Fatalf("with the ratio raised: stopped %+v after %d bytes", rep.Stopped, rep.Unpacked)
	}
}

// A deflated zip entry past the ratio (zip's is per entry) stops the walk too.
func TestZipRatio(t *testing.T) {
	b := archivetest.Zip(t, archivetest.File("small", "x"), archivetest.Entry{Name: "zeros", Zeros: 32 << 20, Mode: 0o644})
	got, rep := walkDiscard(t, b, archive.Policy{})
	if got != 1 || rep.Stopped == nil || rep.Stopped.Limit != "max_ratio" || rep.Stopped.Entry != "zeros" || rep.Unpacked > 4<<20 {
		t.Fatalf("%d made, stopped %+v after %d", got, rep.Stopped, rep.Unpacked)
	}
}

// walkDiscard walks b reading files into nothing; it returns how many files were made.
func walkDiscard(t *testing.T, b []byte, p archive.Policy) (int, *archive.Report) {
	t.Helper()
	n := 0
	rep, err := archive.Walk(b, p, func(e archive.Entry) error {
		if e.Kind == archive.File {
			if _, err := io.Copy(io.Discard, e.Content); err != nil {
				return err
			}
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}
	return n, rep
}

// Hard-link copies count against max_bytes: links to one file cost what files cost.
func TestHardLinkCopiesCounted(t *testing.T) {
	es := []archivetest.Entry{{Name: "big", Zeros: 1 << 20, Mode: 0o644}}
	for i := range 20 {
		es = append(es, archivetest.HardLink(fmt.Sprintf("h%d", i), "big"))
	}
	got, rep := walk(t, archivetest.TarBytes(t, es...), archive.Policy{MaxBytes: 8 << 20})
	if rep.Stopped == nil || rep.Stopped.Limit != "max_bytes" || len(got) > 8 {
		t.Fatalf("%d made, stopped %+v", len(got), rep.Stopped)
	}
}

// An xz block asking for a huge dictionary is refused before any is allocated; a
// truncated stream stops as damaged; what is not an archive says so.
func TestBadStreams(t *testing.T) {
	b := archivetest.Compressed(t, archivetest.XZ, archivetest.File("a", "x"))
	// The first block header follows the 12-byte stream header: size, flags, then the
	// LZMA2 filter (0x21, 0x01, dictionary byte); its CRC-32 is recomputed.
	hs := (int(b[12]) + 1) * 4
	if b[14] != 0x21 || b[15] != 0x01 {
		t.Fatalf("unexpected xz block header % x", b[12:12+hs])
	}
	huge := bytes.Clone(b)
	huge[16] = 38 // 2 GiB
	putCRC(huge[12 : 12+hs])
	if _, err := archive.Walk(huge, archive.Policy{}, func(archive.Entry) error { return nil }); err == nil || !strings.Contains(err.Error(), "dictionary larger") {
		t.Fatalf("a 2 GiB dictionary: %v", err)
	}

	tgz := archivetest.Compressed(t, archivetest.Gzip, archivetest.File("a", strings.Repeat("data ", 1000)), archivetest.File("b", "x"))
	_, rep := walk(t, tgz[:len(tgz)/2], archive.Policy{})
	if rep.Stopped == nil || rep.Stopped.Limit != "damaged" {
		t.Fatalf("truncated: %+v", rep.Stopped)
	}

	for _, b := range [][]byte{[]byte("just text"), gzipped(t, "a gzip of text, no tar")} {
		if _, err := archive.Walk(b, archive.Policy{}, func(archive.Entry) error { return nil }); !errors.Is(err, archive.ErrNotArchive) {
			t.Errorf("%q: %v", b[:4], err)
		}
	}
}

func gzipped(t *testing.T, s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return b.Bytes()
}

// The callback's failure ends the walk with the entry's name, after what was made.
func TestCallbackError(t *testing.T) {
	boom := errors.New("disk full")
	n := 0
	rep, err := archive.Walk(archivetest.TarBytes(t, archivetest.File("a", "1"), archivetest.File("b", "2"), archivetest.File("c", "3")), archive.Policy{},
		func(e archive.Entry) error {
			if e.Name == "b" {
				return boom
			}
			n++
			return nil
		})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "creating b") || n != 1 || rep.Files != 1 {
		t.Fatalf("err %v, %d made, report %+v", err, n, rep)
	}
}

// putCRC sets the CRC-32 that ends an xz block header.
func putCRC(h []byte) {
	binary.LittleEndian.PutUint32(h[len(h)-4:], crc32.ChecksumIEEE(h[:len(h)-4]))
}

func TestDisplay(t *testing.T) {
	for in, want := range map[string]string{"plain/name.txt": "plain/name.txt", "é.txt": "é.txt", "a\x1bb": `"a\x1bb"`, "\xff": `"\xff"`} {
		if got := archive.Display(in); got != want {
			t.Errorf("Display(%q) = %s, want %s", in, got, want)
		}
	}
}
