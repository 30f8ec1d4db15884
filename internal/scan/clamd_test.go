package scan_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/clamtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/scan"
)

// clients are a client of c over its unix socket and one over TCP, named for subtests.
func clients(c *clamtest.Clamd) map[string]*scan.Clamd {
	return map[string]*scan.Clamd{
		"unix": {Network: "unix", Address: c.Socket, Timeout: 30 * time.Second, MaxStream: c.StreamMaxLength},
		"tcp":  {Network: "tcp", Address: c.TCPAddr, Timeout: 30 * time.Second, MaxStream: c.StreamMaxLength},
	}
}

// largeFile is size bytes of seeded random data, with eicar (when not "") at offset.
func largeFile(size, offset int, eicar string) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewChaCha8([32]byte{'t', 'r', 'u', 'e', 'f', 'o', 'r', 'g', 'e'}))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	copy(b[offset:], eicar)
	return b
}

// smallReads hands out its data in reads of n bytes at most: a reader, such as a
// network body, that never fills a chunk in one read.
type smallReads struct {
	r io.Reader
	n int
}

func (s smallReads) Read(p []byte) (int, error) {
	if len(p) > s.n {
		p = p[:s.n]
	}
	return s.r.Read(p)
}

func TestScanVerdicts(t *testing.T) {
	c := clamtest.Start(t)
	t.Logf("clamd answered PING %v after its start", c.Started)
	// EICAR across a boundary of 64 KiB (2621440 = 40 × 65536), in the middle of 5 MiB.
	const size, offset = 5 << 20, 2621440 - 30
	cases := []struct {
		name string
		file func() io.Reader
		// signature is "" for clean.
		signature string
	}{
		{"clean text", func() io.Reader { return strings.NewReader("hello, world\n") }, ""},
		{"empty", func() io.Reader { return strings.NewReader("") }, ""},
		{"EICAR", func() io.Reader { return strings.NewReader(clamtest.EICAR) }, clamtest.Reported},
		{"clean 5 MiB", func() io.Reader { return bytes.NewReader(largeFile(size, offset, "")) }, ""},
		{"EICAR inside 5 MiB", func() io.Reader { return bytes.NewReader(largeFile(size, offset, clamtest.EICAR)) }, clamtest.Reported},
		{"EICAR inside 5 MiB, small reads", func() io.Reader {
			return smallReads{bytes.NewReader(largeFile(size, offset, clamtest.EICAR)), 1000}
		}, clamtest.Reported},
		{"EICAR at the end of 5 MiB", func() io.Reader {
			return bytes.NewReader(largeFile(size, size-len(clamtest.EICAR), clamtest.EICAR))
		}, clamtest.Reported},
		// A reader may return its last bytes with io.EOF.
		{"EICAR, with EOF", func() io.Reader { return iotest.DataErrReader(strings.NewReader(clamtest.EICAR)) }, clamtest.Reported},
	}
	for network, cl := range clients(c) {
		version, err := cl.Version(t.Context())
		if err != nil {
			t.Fatalf("%s: Version: %v", network, err)
		}
		if !strings.HasPrefix(version, "ClamAV ") {
			t.Errorf("%s: Version %q", network, version)
		}
		if err := cl.Ping(t.Context()); err != nil {
			t.Errorf("%s: Ping: %v", network, err)
		}
		for _, tc := range cases {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				before := time.Now()
				v, err := cl.Scan(t.Context(), tc.file())
				if err != nil {
					t.Fatalf("Scan: %v", err)
				}
				if v.Clean != (tc.signature == "") || v.Signature != tc.signature {
					t.Errorf("verdict %+v, want clean %v, signature %q", v, tc.signature == "", tc.signature)
				}
				if v.Scanner != version {
					t.Errorf("scanner %q, want %q", v.Scanner, version)
				}
				if v.At.Before(before) || v.At.After(time.Now()) {
					t.Errorf("At %v is not the time of the scan", v.At)
				}
			})
		}
	}
}

func TestScanTooLarge(t *testing.T) {
	const limit = 1 << 20
	c := clamtest.StartWith(t, clamtest.Options{StreamMaxLength: limit})
	// At the limit clamd still scans: EICAR in the last bytes is found.
	for network, cl := range clients(c) {
		v, err := cl.Scan(t.Context(), bytes.NewReader(largeFile(limit, limit-len(clamtest.EICAR), clamtest.EICAR)))
		if err != nil || v.Signature != clamtest.Reported {
			t.Errorf("%s: %d bytes (the limit) ending in EICAR: %+v, %v", network, limit, v, err)
		}
	}
	// One byte over it there is no verdict; EICAR in the first bytes is not "found"
	// either: a file the scanner did not take whole is not judged on a part.
	over := largeFile(limit+1, 0, clamtest.EICAR)
	for network, cl := range clients(c) {
		t.Run(network+"/known limit", func(t *testing.T) {
			v, err := cl.Scan(t.Context(), bytes.NewReader(over))
			if !errors.Is(err, scan.ErrTooLarge) {
				t.Fatalf("Scan of %d bytes: %+v, %v; want ErrTooLarge", len(over), v, err)
			}
			t.Log(err)
		})
		t.Run(network+"/clamd's refusal", func(t *testing.T) {
			// The client does not know the limit: clamd's answer decides.
			cl := *cl
			cl.MaxStream = -1
			v, err := cl.Scan(t.Context(), bytes.NewReader(largeFile(4*limit, 0, "")))
			switch {
			case errors.Is(err, scan.ErrTooLarge):
				t.Log(err)
			case network == "tcp" && errors.Is(err, scan.ErrUnavailable):
				// Over TCP clamd's answer can be lost to the reset of a connection
				// it closed with data unread: still no verdict.
				t.Logf("clamd's answer was lost: %v", err)
			default:
				t.Fatalf("Scan of %d bytes, limit unknown to the client: %+v, %v; want ErrTooLarge", 4*limit, v, err)
			}
		})
	}
	// A client that thinks the limit is higher than clamd's, for the default (100M).
	cl := scan.Clamd{Network: "unix", Address: c.Socket}
	if _, err := cl.Scan(t.Context(), bytes.NewReader(over)); !errors.Is(err, scan.ErrTooLarge) {
		t.Errorf("Scan of %d bytes, client's limit %d: %v; want ErrTooLarge", len(over), scan.DefaultMaxStream, err)
	}
}

func TestScanStoppedClamd(t *testing.T) {
	c := clamtest.Start(t)
	cls := clients(c)
	for network, cl := range cls {
		if err := cl.Ping(t.Context()); err != nil {
			t.Fatalf("%s: Ping before Stop: %v", network, err)
		}
	}
	c.Stop()
	for network, cl := range cls {
		v, err := cl.Scan(t.Context(), strings.NewReader(clamtest.EICAR))
		if !errors.Is(err, scan.ErrUnavailable) {
			t.Errorf("%s: Scan with clamd stopped: %+v, %v; want ErrUnavailable", network, v, err)
		} else {
			t.Log(err)
		}
		if err := cl.Ping(t.Context()); !errors.Is(err, scan.ErrUnavailable) {
			t.Errorf("%s: Ping with clamd stopped: %v; want ErrUnavailable", network, err)
		}
		if _, err := cl.Version(t.Context()); !errors.Is(err, scan.ErrUnavailable) {
			t.Errorf("%s: Version with clamd stopped: %v; want ErrUnavailable", network, err)
		}
	}
}

// failingReader reads n bytes of EICAR-free data, then fails with err.
type failingReader struct {
	n   int
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, f.err
	}
	p = p[:min(len(p), f.n)]
	for i := range p {
		p[i] = 'a'
	}
	f.n -= len(p)
	return len(p), nil
}

func TestScanReaderError(t *testing.T) {
	c := clamtest.Start(t)
	diskGone := errors.New("disk gone")
	// Bounded: a Scan that ignored the reader's error would read on forever.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for network, cl := range clients(c) {
		// Past a chunk or two, so that clamd has data of the stream when it breaks off.
		v, err := cl.Scan(ctx, &failingReader{n: 200 << 10, err: diskGone})
		if !errors.Is(err, diskGone) || errors.Is(err, scan.ErrUnavailable) {
			t.Errorf("%s: Scan of a failing reader: %+v, %v; want the reader's error", network, v, err)
		}
		// Also when the reader fails with its first read: no verdict on nothing.
		v, err = cl.Scan(ctx, &failingReader{err: diskGone})
		if !errors.Is(err, diskGone) {
			t.Errorf("%s: Scan of a reader failing at once: %+v, %v; want the reader's error", network, v, err)
		}
		// clamd is none the worse.
		if err := cl.Ping(t.Context()); err != nil {
			t.Errorf("%s: Ping after the broken stream: %v", network, err)
		}
	}
}

// cancellingReader cancels its context after its first read, and reads on.
type cancellingReader struct {
	cancel context.CancelFunc
}

func (r cancellingReader) Read(p []byte) (int, error) {
	r.cancel()
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// slowReader sleeps before each read.
type slowReader struct{ d time.Duration }

func (r slowReader) Read(p []byte) (int, error) {
	time.Sleep(r.d)
	p = p[:min(len(p), 1024)]
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

func TestScanEnds(t *testing.T) {
	c := clamtest.Start(t)
	for network, cl := range clients(c) {
		ctx, cancel := context.WithCancel(t.Context())
		v, err := cl.Scan(ctx, cancellingReader{cancel})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: Scan cancelled mid-stream: %+v, %v; want context.Canceled", network, v, err)
		}
		cancel()

		short := *cl
		short.Timeout = 300 * time.Millisecond
		begin := time.Now()
		v, err = short.Scan(t.Context(), slowReader{100 * time.Millisecond})
		if !errors.Is(err, scan.ErrUnavailable) || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: Scan past its Timeout: %+v, %v; want ErrUnavailable", network, v, err)
		}
		if d := time.Since(begin); d > 5*time.Second {
			t.Errorf("%s: Scan with Timeout %v took %v", network, short.Timeout, d)
		}
	}
}
