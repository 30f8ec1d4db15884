package sessions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/scan"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Downloads are scanned for malware when the operator configures a scanner: a file is
// scanned once per content digest, before its first download, and the verdict is stored
// by digest (store.ScanVerdict), so later downloads of the same bytes (in any session,
// on any replica) reuse it. A positive verdict refuses the download for everyone; a
// scanner that gives no verdict (down, too slow, the file too large for it, an answer
// that is no verdict) refuses it too, unless the operator chose to fail open.

var (
	// ErrMalware is a file the malware scanner found something in.
	ErrMalware = errors.New("the malware scanner found malware")
	// ErrScanUnavailable is a file that could not be scanned, refused (failing closed).
	ErrScanUnavailable = errors.New("the malware scanner gave no verdict")
)

// Scanner is a malware scanner: scan.Clamd, or a test's.
type Scanner interface {
	Scan(ctx context.Context, r io.Reader) (scan.Verdict, error)
}

// CheckScan decides whether content, whose SHA-256 is sha256hex, may be downloaded. With
// no scanner (sc nil) there is nothing to check: the zero verdict and nil. A verdict
// stored for the digest is used as is; otherwise content is scanned and the verdict
// stored, clean or not. A positive verdict is ErrMalware (wrapped, naming the signature)
// with the verdict. A scanner that gives no verdict (scan.ErrUnavailable,
// scan.ErrTooLarge, scan.ErrFailed, or anything else) is ErrScanUnavailable (wrapping
// the scanner's error too), unless failOpen: then the zero verdict and nil, nothing
// stored, and the caller logs that the file went out unscanned (the verdict's Scanner is
// "").
func CheckScan(ctx context.Context, st *store.Store, sc Scanner, failOpen bool, sha256hex string, content []byte) (store.ScanVerdict, error) {
	if sc == nil {
		return store.ScanVerdict{}, nil
	}
	v, err := st.GetScanVerdict(ctx, sha256hex)
	switch {
	case errors.Is(err, store.ErrNotFound):
		sv, serr := sc.Scan(ctx, bytes.NewReader(content))
		if serr != nil {
			if failOpen {
				return store.ScanVerdict{}, nil
			}
			return store.ScanVerdict{}, fmt.Errorf("%w: %w", ErrScanUnavailable, serr)
		}
		v = store.ScanVerdict{SHA256: sha256hex, Clean: sv.Clean, Signature: sv.Signature, Scanner: sv.Scanner, ScannedAt: sv.At}
		if err := st.PutScanVerdict(ctx, v); err != nil {
			return store.ScanVerdict{}, err
		}
	case err != nil:
		return store.ScanVerdict{}, err
	}
	if !v.Clean {
		return v, fmt.Errorf("%w: %s (%s)", ErrMalware, v.Signature, v.Scanner)
	}
	return v, nil
}

// RecordMalware appends a malware_found event for a positive verdict v on the file at p
// of session sessionID, unless the session's log already has one for the same digest:
// a download retried after a refusal records nothing more.
func RecordMalware(ctx context.Context, st *store.Store, sessionID, p string, offered bool, v store.ScanVerdict) error {
	prior, err := st.EventsOfKind(ctx, sessionID, events.KindMalwareFound)
	if err != nil {
		return err
	}
	for _, e := range prior {
		if m, ok := events.As[events.MalwareFound](e.Kind, e.Payload); ok && m.SHA256 == v.SHA256 {
			return nil
		}
	}
	_, err = events.Append(ctx, st, sessionID, "", events.MalwareFound{Path: p, SHA256: v.SHA256, Signature: v.Signature,
		Scanner: v.Scanner, ScannedAt: v.ScannedAt.UTC(), Offered: offered})
	return err
}

// OfferScans scans each file as it is offered (tools.OfferScanner), so the verdict is
// kept by digest, and shown, before anyone downloads it. A scanner without a verdict
// leaves the scan to the first download, which fails closed or open as configured.
type OfferScans struct {
	Store   *store.Store
	Scanner Scanner
	Logger  *slog.Logger
}

// ScanOffered scans a's content; malware is recorded in the session's log (once per
// digest) and said to the model, since nobody will be able to download the file.
func (o *OfferScans) ScanOffered(ctx context.Context, a store.Artifact) string {
	v, err := CheckScan(ctx, o.Store, o.Scanner, true, a.SHA256, a.Content)
	switch {
	case errors.Is(err, ErrMalware):
		if rerr := RecordMalware(ctx, o.Store, a.SessionID, a.Path, true, v); rerr != nil && o.Logger != nil {
			o.Logger.Warn("recording malware found in an offered file", "session", a.SessionID, "path", a.Path, "err", rerr)
		}
		return fmt.Sprintf("the malware scanner found %s in it (%s): nobody can download it", v.Signature, v.Scanner)
	case err != nil && o.Logger != nil:
		o.Logger.Warn("scanning an offered file", "session", a.SessionID, "path", a.Path, "err", err)
	case v.Scanner == "" && o.Logger != nil:
		o.Logger.Info("an offered file was not scanned now; its first download scans it", "session", a.SessionID, "path", a.Path)
	}
	return ""
}
