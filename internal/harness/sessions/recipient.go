package sessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Downloads are checked for their recipient before their first byte leaves: the file's
// classification (the agent's word when it offered it) decides who may download it,
// by the operator's policy (policy.DownloadRecipients: by default confidential files go
// to the session's owner only, restricted ones to nobody), unless an admin released
// that very offer to the caller (store.Release). The API and the CLI decide by the same
// function, and every decision on a confidential or restricted file, allowed or not,
// is recorded in the admin audit log, as is every release.

// ErrRecipient is a download refused because the caller is not among those the file's
// classification goes to, and no admin released it to them.
var ErrRecipient = errors.New("the file's classification does not let the caller download it")

// Audit actions of downloads.
const (
	AuditDownloadAllow  = "download.allow"
	AuditDownloadRefuse = "download.refuse"
	AuditRelease        = "download.release"
)

// Recipient is whether one caller may download one offered file, and what decided.
type Recipient struct {
	Allowed        bool
	Classification string
	// Recipients is who the classification goes to.
	Recipients policy.Recipients
	// Rule is what decided, as the audit log says it: "the default for confidential:
	// role owner", "downloads.restricted: nobody without an admin's release; no release
	// to bob", "released to bob by root at 2026-12-01T10:00:00Z".
	Rule string
	// Release is the release that let the caller download; nil when none did.
	Release *store.Release
}

// downloader is c as a download rule sees them on session ss. Sessions are not shared
// with other users yet (no row says so), so the "shared" role matches nobody today.
func downloader(ss store.Session, c Caller) policy.Downloader {
	return policy.Downloader{Name: c.Name, Owner: c.Name == ss.Owner, Admin: c.Admin}
}

// decideRecipient decides whether c may download a, an offered file of ss, given the
// session's releases: the classification's recipients first, then a release of this
// offer to c by name, or to everyone (store.ReleaseToAll) when c may see the session.
func decideRecipient(pol *policy.Policy, ss store.Session, a store.Artifact, releases []store.Release, c Caller) Recipient {
	r := pol.DownloadRecipients(a.Classification)
	v := Recipient{Classification: a.Classification, Recipients: r}
	source := "downloads." + a.Classification
	if r.Default {
		source = "the default for " + a.Classification
	}
	d := downloader(ss, c)
	if ok, by := r.Allows(d); ok {
		v.Allowed, v.Rule = true, source+": "+by
		return v
	}
	for i, rel := range releases {
		if rel.ArtifactID != a.ID || a.ID == "" {
			continue
		}
		if rel.To == c.Name || (rel.To == store.ReleaseToAll && d.SeesSession()) {
			v.Allowed, v.Release = true, &releases[i]
			v.Rule = fmt.Sprintf("released to %s by %s at %s", releaseTo(rel.To), rel.By, rel.At.UTC().Format(time.RFC3339))
			return v
		}
	}
	v.Rule = fmt.Sprintf("%s: %s; no release to %s", source, r, c.Name)
	return v
}

func releaseTo(to string) string {
	if to == store.ReleaseToAll {
		return "everyone who may see the session"
	}
	return to
}

// refusal says why v refuses c the file at p of session id, and how to get it released.
func (v Recipient) refusal(id, p string, c Caller) error {
	src := "the operator's download policy"
	if v.Recipients.Default {
		src = "the harness's default, which the operator's download policy can change"
	}
	who := fmt.Sprintf("only %s may download (%s); %s is not among them, and it was not released to %s", v.Recipients, src, c.Name, c.Name)
	if v.Recipients.Nobody() {
		who = fmt.Sprintf("nobody may download until an admin releases it (%s), and it was not released to %s", src, c.Name)
	}
	return refusal{fmt.Sprintf("%s is classified %s, which %s. An admin can release it: trueforge-harness files release %s %s --to %s (or POST /api/v1/sessions/%s/files/%s/release)",
		p, v.Classification, who, id, p, c.Name, id, p), ErrRecipient}
}

// CheckRecipient decides, before the first byte, whether c may download a, an offered
// file of session ss (for a workspace file never offered, a with no ID and the default
// classification), and records the decision in the audit log when the file is
// confidential or restricted: a download the log did not take is refused (the error
// says so), since the log is the record of who got such a file. A refused download is
// ErrRecipient (wrapped in a sentence naming the classification, who may download it
// and how to get it released), with the decision.
func CheckRecipient(ctx context.Context, st *store.Store, pol *policy.Policy, ss store.Session, a store.Artifact, c Caller) (Recipient, error) {
	var releases []store.Release
	if a.ID != "" {
		var err error
		if releases, err = st.SessionReleases(ctx, ss.ID); err != nil {
			return Recipient{}, err
		}
	}
	v := decideRecipient(pol, ss, a, releases, c)
	if audited(a.Classification) {
		action := AuditDownloadAllow
		if !v.Allowed {
			action = AuditDownloadRefuse
		}
		detail := fmt.Sprintf("classified %s, session of %s; decided by %s", a.Classification, ss.Owner, v.Rule)
		if _, err := st.AppendAudit(context.WithoutCancel(ctx), store.AuditEntry{Actor: c.Name, Action: action, Target: AuditTarget(ss.ID, a.Path, a.SHA256), Detail: detail}); err != nil {
			return v, fmt.Errorf("%s was not handed out: its download could not be recorded in the audit log: %w", a.Path, err)
		}
	}
	if !v.Allowed {
		return v, v.refusal(ss.ID, a.Path, c)
	}
	return v, nil
}

// audited reports whether downloads of classification c are recorded in the audit log.
func audited(c string) bool { return c == policy.ClassConfidential || c == policy.ClassRestricted }

// AuditTarget names a file in the audit log: "SESSION/PATH@sha256:HEX".
func AuditTarget(sessionID, p, sha256 string) string {
	return sessionID + "/" + p + "@sha256:" + sha256
}

// Recipients decides for each of arts, offered files of session ss, whether c may
// download it: CheckRecipient's decision, without recording it (a listing hands nothing
// out).
func Recipients(ctx context.Context, st *store.Store, pol *policy.Policy, ss store.Session, arts []store.Artifact, c Caller) ([]Recipient, error) {
	releases, err := st.SessionReleases(ctx, ss.ID)
	if err != nil {
		return nil, err
	}
	out := make([]Recipient, len(arts))
	for i, a := range arts {
		out[i] = decideRecipient(pol, ss, a, releases, c)
	}
	return out, nil
}

// FilesSession reads session id for c's use of its files: the owner's own, any for an
// admin (an admin lists every session and is the one who releases files), and another
// user's only when one of its offered files is theirs to download (a download rule
// naming them, or a release to them): then visitor is true, and only those files are
// theirs to see. Anyone else gets Get's ErrNotOwner (wrapped), which callers answer as
// a missing session.
func FilesSession(ctx context.Context, st *store.Store, pol *policy.Policy, id string, c Caller) (s store.Session, visitor bool, err error) {
	s, err = Get(ctx, st, id, c, true)
	if !errors.Is(err, ErrNotOwner) {
		return s, false, err
	}
	arts, lerr := st.ListArtifacts(ctx, s.ID)
	if lerr != nil {
		return store.Session{}, false, lerr
	}
	vs, lerr := Recipients(ctx, st, pol, s, arts, c)
	if lerr != nil {
		return store.Session{}, false, lerr
	}
	for _, v := range vs {
		if v.Allowed {
			return s, true, nil
		}
	}
	return store.Session{}, false, err
}

// Release releases offered file a of session ss to user to (store.ReleaseToAll: anyone
// who may see the session), by admin by, with a note, and records it in the audit log.
// A release the log did not take is undone: no release goes unrecorded.
func Release(ctx context.Context, st *store.Store, ss store.Session, a store.Artifact, to, by, note string, now time.Time) error {
	if err := st.PutRelease(ctx, store.Release{ArtifactID: a.ID, To: to, By: by, At: now, Note: note}); err != nil {
		return err
	}
	detail := fmt.Sprintf("released to %s; classified %s, session of %s", releaseTo(to), a.Classification, ss.Owner)
	if note != "" {
		detail += "; note: " + note
	}
	ctx = context.WithoutCancel(ctx)
	if _, err := st.AppendAudit(ctx, store.AuditEntry{Actor: by, Action: AuditRelease, Target: AuditTarget(ss.ID, a.Path, a.SHA256), Detail: detail}); err != nil {
		if uerr := st.DeleteRelease(ctx, a.ID, to); uerr != nil {
			return fmt.Errorf("the audit log did not take the release of %s (%w), and undoing it failed: %w", a.Path, err, uerr)
		}
		return fmt.Errorf("the release of %s was undone: the audit log did not take it: %w", a.Path, err)
	}
	return nil
}
