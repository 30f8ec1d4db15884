package sessions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

var (
	// ErrNoSandbox is a session that never had a sandbox provisioned.
	ErrNoSandbox = errors.New("the session has no sandbox")
	// ErrSandboxDeleted is a sandbox deleted after being idle: its files are gone.
	ErrSandboxDeleted = errors.New("the session's sandbox was deleted")
	// ErrSandboxArchived is an archived sandbox: its files are read again once a turn
	// resumes it, never by reading them.
	ErrSandboxArchived = errors.New("the session's sandbox is archived")
	// ErrSandboxChanging is a sandbox between states (neither running nor stopped).
	ErrSandboxChanging = errors.New("the session's sandbox is changing state")

	// ErrOfferExpired is an offered file past its expiry.
	ErrOfferExpired = errors.New("the offer expired")
	// ErrDigestMismatch is an offered file whose bytes are not what was recorded.
	ErrDigestMismatch = errors.New("the file does not match its recorded sha256")
)

// Sandbox is session id's sandbox record; ErrNoSandbox (wrapped) when none was ever
// provisioned.
func Sandbox(ctx context.Context, st *store.Store, id string) (store.SessionSandbox, error) {
	rec, err := st.GetSessionSandbox(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return rec, fmt.Errorf("session %s: %w", id, ErrNoSandbox)
	}
	return rec, err
}

// Readable says whether the files of a sandbox in state may be read now without
// provisioning or resuming it (nil), or why not: ErrSandboxDeleted, ErrSandboxArchived
// or ErrSandboxChanging.
func Readable(state string) error {
	switch state {
	case store.SandboxStateRunning, store.SandboxStateStopped:
		return nil
	case store.SandboxStateDeleted:
		return ErrSandboxDeleted
	case store.SandboxStateArchived:
		return ErrSandboxArchived
	}
	return fmt.Errorf("the sandbox is %s: %w", state, ErrSandboxChanging)
}

// Runtime is the runtime that reads the sandbox of rec, from its provider.
func Runtime(ctx context.Context, st *store.Store, runtimes lifecycle.RuntimeSource, rec store.SessionSandbox) (sandbox.Runtime, error) {
	p, err := st.GetSandboxProvider(ctx, rec.Provider)
	if err != nil {
		return nil, fmt.Errorf("sandbox provider %q of session %s: %w", rec.Provider, rec.SessionID, err)
	}
	return runtimes.Runtime(ctx, p)
}

// CheckOffer refuses an offered file that may not be handed out at now: expired
// (ErrOfferExpired), over maxBytes when that is above 0 (sandbox.ErrTooLarge), or not
// what was recorded (ErrDigestMismatch), in that order. The sum of its content is
// returned for the caller's headers.
func CheckOffer(a store.Artifact, now time.Time, maxBytes int64) ([32]byte, error) {
	if !now.Before(a.ExpiresAt) {
		return [32]byte{}, refusal{fmt.Sprintf("the offer of %s expired at %s", a.Path, a.ExpiresAt.UTC().Format(time.RFC3339)), ErrOfferExpired}
	}
	if n := int64(len(a.Content)); maxBytes > 0 && n > maxBytes {
		return [32]byte{}, refusal{fmt.Sprintf("%s holds %d bytes, over the download cap of %d", a.Path, n, maxBytes), sandbox.ErrTooLarge}
	}
	sum := sha256.Sum256(a.Content)
	if hex.EncodeToString(sum[:]) != a.SHA256 || int64(len(a.Content)) != a.Size {
		return sum, refusal{fmt.Sprintf("artifact %s does not match its recorded sha256 %s: refusing to hand it out", a.Path, a.SHA256), ErrDigestMismatch}
	}
	return sum, nil
}

// refusal is an error that says what was refused in a sentence of its own and is the
// sentinel of its kind for errors.Is.
type refusal struct {
	msg  string
	kind error
}

func (r refusal) Error() string { return r.msg }
func (r refusal) Unwrap() error { return r.kind }
