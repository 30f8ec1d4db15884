package api

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sessions"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// releaseSuffix ends the URL of a release: the file's download URL, then /release
// (net/http patterns cannot have a segment after {path...}, so the POST route is the
// files route and the handler reads the suffix).
const releaseSuffix = "/release"

// releaseRequest is POST /sessions/{id}/files/{path}/release's body: to whom (a user's
// name, or "*" for everyone who may see the session), and why.
type releaseRequest struct {
	To   string `json:"to"`
	Note string `json:"note,omitempty"`
}

func (b releaseRequest) check() error { return required("to", b.To) }

// releaseJSON is a release as answered.
type releaseJSON struct {
	Path           string    `json:"path"`
	SHA256         string    `json:"sha256"`
	Classification string    `json:"classification"`
	To             string    `json:"to"`
	By             string    `json:"by"`
	At             time.Time `json:"at"`
	Note           string    `json:"note"`
}

// releaseFile releases an offered file of any session to a user, or to everyone who may
// see the session (admins only; sessions.Release records it in the audit log): the way
// a restricted file reaches anyone, and a file anyone its classification leaves out.
// The release is of that offer: the same path offered again is released again.
func (s *Server) releaseFile(w http.ResponseWriter, r *http.Request, c *caller) error {
	raw, ok := strings.CutSuffix(r.PathValue("path"), releaseSuffix)
	if !ok {
		return errorf(http.StatusMethodNotAllowed, CodeMethod, "POST on a file releases it: POST %s/release (admins only); a file is downloaded with GET", fileURL(r.PathValue("id"), r.PathValue("path")))
	}
	if !c.user.Admin {
		return errorf(http.StatusForbidden, CodeAdminOnly, "only an admin may release a file")
	}
	ss, err := s.sessionFor(r, c, true)
	if err != nil {
		return err
	}
	p, err := cleanFilePath(raw)
	if err != nil {
		return err
	}
	var req releaseRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	ctx := r.Context()
	if req.To != store.ReleaseToAll {
		if _, err := s.cfg.Store.GetUser(ctx, req.To); errors.Is(err, store.ErrNotFound) {
			return errorf(http.StatusUnprocessableEntity, CodeUnprocessable, `"to": no user %q; name a user (trueforge-harness users list), or "*" for everyone who may see the session`, req.To)
		} else if err != nil {
			return err
		}
	}
	a, err := s.cfg.Store.GetArtifact(ctx, ss.ID, p)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, CodeNotOffered, "%s was not offered for download in session %s: only offered files are released", p, ss.ID)
	}
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	if err := sessions.Release(ctx, s.cfg.Store, ss, a, req.To, c.user.Name, req.Note, now); err != nil {
		return err
	}
	s.log.Info("a file was released", "session", ss.ID, "path", p, "sha256", a.SHA256, "to", req.To, "by", c.user.Name)
	writeJSON(w, http.StatusOK, releaseJSON{Path: a.Path, SHA256: a.SHA256, Classification: a.Classification, To: req.To, By: c.user.Name, At: now.UTC(), Note: req.Note})
	return nil
}
