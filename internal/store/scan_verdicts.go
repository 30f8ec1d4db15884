package store

import (
	"context"
	"fmt"
	"time"
)

// migrationScanVerdicts (18): the malware scanner's verdicts on offered and downloaded
// files (issue 27). A verdict belongs to the content, not to a session or a path: it is
// keyed by the file's SHA-256 (hex), so a file is scanned once per digest, before its
// first download, and every later download of the same bytes, in any session and on any
// replica, reuses the verdict. A positive verdict is stored like a clean one, so that a
// blocked file stays blocked without asking the scanner again.
//
// Who writes: the harness, which downloads (a runtime table; teams have no access). A
// verdict is never a scanner's failure: when the scanner is down nothing is stored, and
// the next download asks again.
var migrationScanVerdicts = migration{sql: `
CREATE TABLE scan_verdicts (
	sha256     TEXT PRIMARY KEY,
	clean      BIGINT NOT NULL,
	signature  TEXT NOT NULL DEFAULT '',
	scanner    TEXT NOT NULL DEFAULT '',
	scanned_at BIGINT NOT NULL
);
`}

// ScanVerdict is a malware scanner's verdict on the content with one digest.
type ScanVerdict struct {
	// SHA256 is the hex digest of the scanned bytes.
	SHA256 string
	// Clean is the scanner's verdict; when false, Signature names what it found.
	Clean     bool
	Signature string
	// Scanner names the scanner and its database ("ClamAV 1.4.6/27530/...").
	Scanner   string
	ScannedAt time.Time
}

// GetScanVerdict reads the stored verdict on the content with digest sha256 (hex);
// ErrNotFound when it was never scanned.
func (s *Store) GetScanVerdict(ctx context.Context, sha256 string) (ScanVerdict, error) {
	v := ScanVerdict{}
	var clean, at int64
	err := s.db.QueryRowContext(ctx, `SELECT sha256, clean, signature, scanner, scanned_at FROM scan_verdicts WHERE sha256 = ?`, sha256).
		Scan(&v.SHA256, &clean, &v.Signature, &v.Scanner, &at)
	if err != nil {
		return found(v, err, "reading the", "scan verdict on sha256 %s", sha256)
	}
	v.Clean, v.ScannedAt = clean != 0, time.UnixMilli(at)
	return v, nil
}

// PutScanVerdict records (or replaces) the verdict on the content with digest v.SHA256.
func (s *Store) PutScanVerdict(ctx context.Context, v ScanVerdict) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO scan_verdicts(sha256, clean, signature, scanner, scanned_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT(sha256) DO UPDATE SET clean = excluded.clean, signature = excluded.signature, scanner = excluded.scanner, scanned_at = excluded.scanned_at`,
		v.SHA256, b2i(v.Clean), v.Signature, v.Scanner, v.ScannedAt.UnixMilli())
	if err != nil {
		return fmt.Errorf("recording the scan verdict on sha256 %s: %w", v.SHA256, err)
	}
	return nil
}
