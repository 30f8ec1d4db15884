package sessions_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/clamtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sessions"
	"github.com/trueforge/terraform-provider-trueforge/internal/scan"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// counting counts the scans it passes on.
type counting struct {
	sc sessions.Scanner
	n  atomic.Int64
}

func (c *counting) Scan(ctx context.Context, r io.Reader) (scan.Verdict, error) {
	c.n.Add(1)
	return c.sc.Scan(ctx, r)
}

// failing is a scanner that gives no verdict.
type failing struct{ err error }

func (f failing) Scan(context.Context, io.Reader) (scan.Verdict, error) { return scan.Verdict{}, f.err }

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestCheckScan against a real clamd: a clean file passes and EICAR is ErrMalware
// naming its signature, each scanned once per digest (the stored verdict answers the
// second check, a stopped scanner included); a stopped clamd fails closed
// (ErrScanUnavailable wrapping scan.ErrUnavailable) or, failing open, passes with nothing
// stored; no scanner checks nothing.
func TestCheckScan(t *testing.T) {
	c := clamtest.Start(t)
	st := storetest.Open(t, filepath.Join(t.TempDir(), "cp.db"))
	ctx := context.Background()
	sc := &counting{sc: &scan.Clamd{Network: "unix", Address: c.Socket, Timeout: 30 * time.Second, MaxStream: c.StreamMaxLength}}

	clean := []byte("hello, world\n")
	v, err := sessions.CheckScan(ctx, st, sc, false, digest(clean), clean)
	if err != nil || !v.Clean || !strings.HasPrefix(v.Scanner, "ClamAV ") {
		t.Fatalf("clean file: %+v, %v", v, err)
	}
	eicar := []byte(clamtest.EICAR)
	for i := range 2 {
		v, err = sessions.CheckScan(ctx, st, sc, false, digest(eicar), eicar)
		if !errors.Is(err, sessions.ErrMalware) || v.Clean || v.Signature != clamtest.Reported || !strings.Contains(err.Error(), clamtest.Reported) {
			t.Fatalf("EICAR, check %d: %+v, %v; want ErrMalware naming %s", i+1, v, err, clamtest.Reported)
		}
	}
	if _, err := sessions.CheckScan(ctx, st, sc, false, digest(clean), clean); err != nil {
		t.Fatal(err)
	}
	if n := sc.n.Load(); n != 2 {
		t.Errorf("%d scans for 2 digests; want 2", n)
	}

	c.Stop()
	// Known verdicts need no scanner.
	if _, err := sessions.CheckScan(ctx, st, sc, false, digest(eicar), eicar); !errors.Is(err, sessions.ErrMalware) {
		t.Errorf("EICAR with clamd stopped: %v; want the stored verdict", err)
	}
	other := []byte("never scanned")
	_, err = sessions.CheckScan(ctx, st, sc, false, digest(other), other)
	if !errors.Is(err, sessions.ErrScanUnavailable) || !errors.Is(err, scan.ErrUnavailable) {
		t.Fatalf("clamd stopped: %v; want ErrScanUnavailable wrapping scan.ErrUnavailable", err)
	}
	if v, err := sessions.CheckScan(ctx, st, sc, true, digest(other), other); err != nil || v.Scanner != "" {
		t.Fatalf("clamd stopped, failing open: %+v, %v; want no verdict and no error", v, err)
	}
	if _, err := st.GetScanVerdict(ctx, digest(other)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a verdict was stored without a scan: %v", err)
	}
	if v, err := sessions.CheckScan(ctx, st, nil, false, digest(eicar), eicar); err != nil || v != (store.ScanVerdict{}) {
		t.Errorf("no scanner: %+v, %v", v, err)
	}
}

// A file too large for the scanner, or an answer that is no verdict, fails closed:
// never clean.
func TestCheckScanNoVerdict(t *testing.T) {
	st := storetest.Open(t, filepath.Join(t.TempDir(), "cp.db"))
	for _, cause := range []error{scan.ErrTooLarge, scan.ErrFailed, errors.New("something else")} {
		b := []byte("file for " + cause.Error())
		_, err := sessions.CheckScan(context.Background(), st, failing{fmt.Errorf("scanning: %w", cause)}, false, digest(b), b)
		if !errors.Is(err, sessions.ErrScanUnavailable) || !errors.Is(err, cause) {
			t.Errorf("%v: %v; want ErrScanUnavailable wrapping it", cause, err)
		}
	}
}

// RecordMalware records one malware_found per session and digest.
func TestRecordMalware(t *testing.T) {
	st := storetest.Open(t, filepath.Join(t.TempDir(), "cp.db"))
	ctx := context.Background()
	if err := st.CreateSession(ctx, store.Session{ID: "s-1", Agent: "a", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	v := store.ScanVerdict{SHA256: "ab", Signature: "Eicar", Scanner: "ClamAV 1", ScannedAt: at}
	for range 3 {
		if err := sessions.RecordMalware(ctx, st, "s-1", "x.exe", true, v); err != nil {
			t.Fatal(err)
		}
	}
	v.SHA256 = "cd"
	if err := sessions.RecordMalware(ctx, st, "s-1", "y.exe", false, v); err != nil {
		t.Fatal(err)
	}
	evs, err := st.EventsOfKind(ctx, "s-1", events.KindMalwareFound)
	if err != nil || len(evs) != 2 {
		t.Fatalf("%d malware_found events, %v; want 2", len(evs), err)
	}
	m, ok := events.As[events.MalwareFound](evs[0].Kind, evs[0].Payload)
	if want := (events.MalwareFound{Path: "x.exe", SHA256: "ab", Signature: "Eicar", Scanner: "ClamAV 1", ScannedAt: at, Offered: true}); !ok || m != want {
		t.Errorf("event %+v; want %+v", m, want)
	}
}

// Scanning as a file is offered, against a real clamd: a clean file's verdict is stored
// before anyone downloads it; EICAR is said to the model and recorded in the session's
// log once; a stopped clamd stores nothing (the first download scans, failing closed).
func TestOfferScans(t *testing.T) {
	c := clamtest.Start(t)
	st := storetest.Open(t, filepath.Join(t.TempDir(), "cp.db"))
	ctx := context.Background()
	if err := st.CreateSession(ctx, store.Session{ID: "s1", Agent: "a", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	o := &sessions.OfferScans{Store: st, Scanner: &scan.Clamd{Network: "unix", Address: c.Socket, Timeout: 30 * time.Second, MaxStream: c.StreamMaxLength}}
	offer := func(p string, content []byte) string {
		return o.ScanOffered(ctx, store.Artifact{SessionID: "s1", Path: p, SHA256: digest(content), Content: content})
	}
	clean := []byte("a clean report\n")
	if said := offer("report.txt", clean); said != "" {
		t.Fatalf("a clean file: %q", said)
	}
	if v, err := st.GetScanVerdict(ctx, digest(clean)); err != nil || !v.Clean {
		t.Fatalf("the clean verdict before any download: %+v, %v", v, err)
	}
	eicar := []byte(clamtest.EICAR)
	for range 2 {
		if said := offer("eicar.com", eicar); !strings.Contains(said, clamtest.Reported) || !strings.Contains(said, "nobody can download it") {
			t.Fatalf("EICAR: %q", said)
		}
	}
	if evs, err := st.EventsOfKind(ctx, "s1", events.KindMalwareFound); err != nil || len(evs) != 1 {
		t.Fatalf("malware_found events: %d, %v; want 1", len(evs), err)
	}
	c.Stop()
	later := []byte("offered while clamd is down\n")
	if said := offer("later.txt", later); said != "" {
		t.Fatalf("a scanner without a verdict: %q", said)
	}
	if _, err := st.GetScanVerdict(ctx, digest(later)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a verdict without a scan: %v", err)
	}
}
