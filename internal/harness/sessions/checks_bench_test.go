package sessions_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sessions"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// BenchmarkDownloadChecks is what the checks before a download's first byte cost: the
// type check (sniffing, and for an archive the look for executables inside) and the
// malware verdict read from the store (cached: the scanner is never called), for a
// 1 MiB file of each kind, on the first download of the bytes and on every later one.
// Issue 27's target: the type check and a cached verdict add at most 1 ms.
func BenchmarkDownloadChecks(b *testing.B) {
	st := storetest.Open(b, filepath.Join(b.TempDir(), "cp.db"))
	ctx := context.Background()
	for _, c := range []struct {
		name, path string
		content    []byte
	}{
		{"text", "report.csv", bytes.Repeat([]byte("city,temp\nParis,19\n"), 1<<20/20)},
		{"zip", "bundle.zip", zipOf(b, 200, 5<<10)},
		{"tgz", "bundle.tar.gz", tgzOf(b, 200, 5<<10)},
	} {
		sum := digest(c.content)
		if err := st.PutScanVerdict(ctx, store.ScanVerdict{SHA256: sum, Clean: true, Scanner: "bench", ScannedAt: time.Now()}); err != nil {
			b.Fatal(err)
		}
		scanner := failing{fmt.Errorf("the scanner was called")}
		// first: the first download of these bytes (sniffed, an archive opened).
		b.Run(c.name+"/first", func(b *testing.B) {
			b.SetBytes(int64(len(c.content)))
			for b.Loop() {
				if _, err := sessions.CheckType(c.path, c.content, false); err != nil {
					b.Fatal(err)
				}
				if _, err := sessions.CheckScan(ctx, st, scanner, false, sum, c.content); err != nil {
					b.Fatal(err)
				}
			}
		})
		// again: every later download (the type check kept by digest, as the API keeps
		// it, and the scan verdict read from the store).
		b.Run(c.name+"/again", func(b *testing.B) {
			var types sessions.TypeChecks
			_, _ = types.Check(c.path, sum, c.content, false)
			b.SetBytes(int64(len(c.content)))
			for b.Loop() {
				if _, err := types.Check(c.path, sum, c.content, false); err != nil {
					b.Fatal(err)
				}
				if _, err := sessions.CheckScan(ctx, st, scanner, false, sum, c.content); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// zipOf is a zip of n text files of size bytes each.
func zipOf(tb testing.TB, n, size int) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range n {
		w, err := zw.Create(fmt.Sprintf("dir/file-%d.txt", i))
		if err != nil {
			tb.Fatal(err)
		}
		_, _ = w.Write(bytes.Repeat([]byte{'a' + byte(i%26)}, size))
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// tgzOf is a tar.gz of n text files of size bytes each.
func tgzOf(tb testing.TB, n, size int) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for i := range n {
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("dir/file-%d.txt", i), Mode: 0o644, Size: int64(size)}); err != nil {
			tb.Fatal(err)
		}
		_, _ = tw.Write(bytes.Repeat([]byte{'a' + byte(i%26)}, size))
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}
