package attachments

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

func TestCopyHashed(t *testing.T) {
	data := make([]byte, 5<<20+123)
	_, _ = rand.Read(data)
	want := sha256.Sum256(data)
	for _, limit := range []int64{int64(len(data)) + 1, 3 << 20} {
		var dst bytes.Buffer
		h := sha256.New()
		n, err := copyHashed(&dst, iotest.HalfReader(bytes.NewReader(data)), h, limit)
		wantN := min(limit, int64(len(data)))
		if err != nil || n != wantN || !bytes.Equal(dst.Bytes(), data[:wantN]) {
			t.Fatalf("limit %d: copied %d, %v", limit, n, err)
		}
		if sum := sha256.Sum256(data[:wantN]); !bytes.Equal(h.Sum(nil), sum[:]) {
			t.Fatalf("limit %d: wrong digest", limit)
		}
		if limit > int64(len(data)) && !bytes.Equal(h.Sum(nil), want[:]) {
			t.Fatal("wrong digest of the whole")
		}
	}
	boom := errors.New("boom")
	if _, err := copyHashed(io.Discard, iotest.ErrReader(boom), sha256.New(), 10); !errors.Is(err, boom) {
		t.Fatalf("a read error: %v", err)
	}
	if _, err := copyHashed(failWriter{boom}, bytes.NewReader(data), sha256.New(), int64(len(data))); !errors.Is(err, boom) {
		t.Fatalf("a write error: %v", err)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }
