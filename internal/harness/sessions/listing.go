package sessions

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/filetype"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// A listing of offered files says, for each, the verdicts a download would meet, from
// what is recorded and without reading the content: the type recorded at offer time,
// the malware scanner's stored verdict on its digest, its classification and whether
// the caller may download it (the recipient check itself), and if not, why.

// The verdicts of ScanState.
const (
	ScanClean   = "clean"       // the scanner found nothing
	ScanFound   = "found"       // the scanner found Signature: downloads are refused
	ScanPending = "not_scanned" // a scanner is configured; it scans at the first download
	ScanOff     = "off"         // no scanner is configured: nothing is scanned
)

// ScanState is what is known of a file's malware scan without scanning it.
type ScanState struct {
	Verdict   string
	Signature string // what was found, for ScanFound
	Scanner   string // the scanner and its database, for ScanClean and ScanFound
}

// ScanStateOf is the scan state of the content with digest sha256hex: ScanOff when no
// scanner is configured (downloads are not scanned, whatever was stored before), else
// the stored verdict, or ScanPending.
func ScanStateOf(ctx context.Context, st *store.Store, scannerOn bool, sha256hex string) (ScanState, error) {
	if !scannerOn {
		return ScanState{Verdict: ScanOff}, nil
	}
	v, err := st.GetScanVerdict(ctx, sha256hex)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return ScanState{Verdict: ScanPending}, nil
	case err != nil:
		return ScanState{}, err
	case !v.Clean:
		return ScanState{Verdict: ScanFound, Signature: v.Signature, Scanner: v.Scanner}, nil
	}
	return ScanState{Verdict: ScanClean, Scanner: v.Scanner}, nil
}

// ListOptions are the operator's settings a listing's verdicts follow, as downloads do.
type ListOptions struct {
	Policy           *policy.Policy
	Scanner          bool // a malware scanner is configured
	AllowExecutables bool
	Now              time.Time
}

// FileVerdicts is what a listing says of one offered file to one caller.
type FileVerdicts struct {
	// Type is the kind recorded when it was offered ("" for a file offered before kinds
	// were recorded), Mismatch how it contradicts the file's name.
	Type, Mismatch string
	Scan           ScanState
	Recipient      Recipient
	// Refused is why the caller may not download it now, nil when they may: for
	// errors.Is, ErrOfferExpired, ErrRecipient, ErrExecutable or ErrMalware, in the order
	// a download checks them. An archive holding an executable is only found by the
	// download, which reads it.
	Refused error
}

// Verdicts says, for each of arts (offered files of session ss), what a download by c
// would meet.
func Verdicts(ctx context.Context, st *store.Store, ss store.Session, arts []store.Artifact, c Caller, o ListOptions) ([]FileVerdicts, error) {
	recipients, err := Recipients(ctx, st, o.Policy, ss, arts, c)
	if err != nil {
		return nil, err
	}
	out := make([]FileVerdicts, len(arts))
	for i, a := range arts {
		v := FileVerdicts{Type: a.DetectedType, Recipient: recipients[i]}
		if a.DetectedType != "" {
			v.Mismatch = filetype.Mismatch(path.Base(a.Path), a.DetectedType)
		}
		if v.Scan, err = ScanStateOf(ctx, st, o.Scanner, a.SHA256); err != nil {
			return nil, err
		}
		switch {
		case !o.Now.Before(a.ExpiresAt):
			v.Refused = refusal{fmt.Sprintf("the offer of %s expired at %s", a.Path, a.ExpiresAt.UTC().Format(time.RFC3339)), ErrOfferExpired}
		case !v.Recipient.Allowed:
			v.Refused = v.Recipient.refusal(ss.ID, a.Path, c)
		case filetype.Executable(a.DetectedType) && !o.AllowExecutables:
			v.Refused = fmt.Errorf("%s is an executable (%s): %w", a.Path, a.DetectedType, ErrExecutable)
		case v.Scan.Verdict == ScanFound:
			v.Refused = refusal{fmt.Sprintf("%s was blocked: the malware scanner found %s", a.Path, v.Scan.Signature), ErrMalware}
		}
		out[i] = v
	}
	return out, nil
}
