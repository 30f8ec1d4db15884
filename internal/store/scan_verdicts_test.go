package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A verdict round-trips by digest, replaced by a later one; an unscanned digest is
// ErrNotFound; a second store on the same database (another replica) reads it.
func TestScanVerdicts(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		const sum = "275a021bbfb6489e54d471899f7db9d1663fc695ec2fe2a2c4538aabf651fd0f"
		if _, err := st.GetScanVerdict(ctx, sum); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unscanned digest: %v; want ErrNotFound", err)
		}
		at := time.UnixMilli(1_700_000_000_123)
		found := ScanVerdict{SHA256: sum, Signature: "Eicar-Signature", Scanner: "ClamAV 1.4.6/27530", ScannedAt: at}
		must(t, st.PutScanVerdict(ctx, found))
		got, err := reopen(t, st).GetScanVerdict(ctx, sum)
		if err != nil || got.Clean || got.Signature != found.Signature || got.Scanner != found.Scanner || !got.ScannedAt.Equal(at) || got.SHA256 != sum {
			t.Fatalf("GetScanVerdict: %+v, %v; want %+v", got, err, found)
		}
		clean := ScanVerdict{SHA256: sum, Clean: true, Scanner: "ClamAV 1.4.7", ScannedAt: at.Add(time.Second)}
		must(t, st.PutScanVerdict(ctx, clean))
		if got, err := st.GetScanVerdict(ctx, sum); err != nil || !got.Clean || got.Signature != "" || got.Scanner != clean.Scanner {
			t.Fatalf("after replacing: %+v, %v; want %+v", got, err, clean)
		}
	})
}

// The harness's role reads and writes verdicts on PostgreSQL (a runtime table).
func TestScanVerdictsHarnessRole(t *testing.T) {
	p := newRLSPlane(t)
	ctx := context.Background()
	v := ScanVerdict{SHA256: "ab", Clean: true, Scanner: "ClamAV", ScannedAt: time.UnixMilli(5)}
	must(t, p.asHarness.PutScanVerdict(ctx, v))
	if got, err := p.asHarness.GetScanVerdict(ctx, "ab"); err != nil || !got.Clean {
		t.Fatalf("as the harness: %+v, %v", got, err)
	}
	if _, err := p.asAlice.GetScanVerdict(ctx, "ab"); err == nil {
		t.Error("a team read a scan verdict")
	}
}
