package harnesstest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
)

// FileContains finds needles in the data extents of a sparse file, also across the
// boundary of its read chunks, and reports absent ones as absent.
func TestFileContainsSearchesSparseData(t *testing.T) {
	p := filepath.Join(t.TempDir(), "img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2 << 30); err != nil { // 2 GB, sparse
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("head-marker"), 0); err != nil {
		t.Fatal(err)
	}
	// Far past a hole, a 2 MiB extent with the needle straddling its first 1 MiB read.
	filler := make([]byte, 2<<20)
	for i := range filler {
		filler[i] = 'x'
	}
	if _, err := f.WriteAt(filler, 1<<30); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("SPAN-NEEDLE-12345"), (1<<30)+(1<<20)-6); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, err := harnesstest.FileContains(p, []byte("head-marker"), []byte("SPAN-NEEDLE-12345"), []byte("absent-needle"))
	if err != nil {
		t.Fatal(err)
	}
	if !got[0] || !got[1] || got[2] {
		t.Fatalf("found %v; want true, true, false", got)
	}
}
