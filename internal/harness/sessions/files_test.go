package sessions_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sessions"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// TestReadable: only a running or stopped sandbox is read; the others say why not with
// the sentinel the CLI and the API choose their answer by.
func TestReadable(t *testing.T) {
	for state, want := range map[string]error{
		store.SandboxStateRunning:  nil,
		store.SandboxStateStopped:  nil,
		store.SandboxStateDeleted:  sessions.ErrSandboxDeleted,
		store.SandboxStateArchived: sessions.ErrSandboxArchived,
		"creating":                 sessions.ErrSandboxChanging,
	} {
		if err := sessions.Readable(state); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("Readable(%q) = %v; want %v", state, err, want)
		}
	}
}

// TestCheckOffer: an offer is refused once expired (at its expiry, not after), over the
// cap, or when its bytes or size are not what was recorded, in that order; the CLI
// prints the refusal as it is.
func TestCheckOffer(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	content := []byte("hello")
	sum := sha256.Sum256(content)
	good := store.Artifact{Path: "out.txt", Content: content, Size: 5, SHA256: hex.EncodeToString(sum[:]), ExpiresAt: now.Add(time.Minute)}
	for _, tc := range []struct {
		name    string
		change  func(*store.Artifact)
		max     int64
		want    error
		wantMsg string
	}{
		{name: "good", change: func(*store.Artifact) {}},
		{name: "no cap", change: func(*store.Artifact) {}, max: 0},
		{name: "expired at its expiry", change: func(a *store.Artifact) { a.ExpiresAt = now }, want: sessions.ErrOfferExpired,
			wantMsg: "the offer of out.txt expired at 2026-01-02T03:04:05Z"},
		{name: "over the cap", change: func(*store.Artifact) {}, max: 4, want: sandbox.ErrTooLarge,
			wantMsg: "out.txt holds 5 bytes, over the download cap of 4"},
		{name: "other bytes", change: func(a *store.Artifact) { a.Content = []byte("hellO") }, want: sessions.ErrDigestMismatch,
			wantMsg: "artifact out.txt does not match its recorded sha256 " + good.SHA256 + ": refusing to hand it out"},
		{name: "other size", change: func(a *store.Artifact) { a.Size = 6 }, want: sessions.ErrDigestMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := good
			tc.change(&a)
			got, err := sessions.CheckOffer(a, now, tc.max)
			if tc.want == nil {
				if err != nil || got != sum {
					t.Fatalf("CheckOffer = %x, %v; want the sum, no error", got, err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("CheckOffer: %v; want %v", err, tc.want)
			}
			if tc.wantMsg != "" && err.Error() != tc.wantMsg {
				t.Fatalf("CheckOffer says %q; want %q", err.Error(), tc.wantMsg)
			}
		})
	}
}
