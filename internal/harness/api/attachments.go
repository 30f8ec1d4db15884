package api

import (
	"errors"
	"mime"
	"net/http"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/attachments"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// CodeNoAttachments answers attachment routes of a harness that keeps none.
const CodeNoAttachments = "attachments_disabled"

// attachmentJSON is an attachment as the API shows it.
type attachmentJSON struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	OriginalName   string    `json:"original_name"`
	Path           string    `json:"path"`
	Size           int64     `json:"size"`
	SHA256         string    `json:"sha256"`
	DeclaredType   string    `json:"declared_type,omitempty"`
	DetectedType   string    `json:"detected_type"`
	Classification string    `json:"classification"`
	Uploader       string    `json:"uploader"`
	CreatedAt      time.Time `json:"created_at"`
	// InWorkspace: the file was written into the session's current sandbox.
	InWorkspace bool `json:"in_workspace"`
}

func attachmentOf(a store.Attachment) attachmentJSON {
	return attachmentJSON{ID: a.ID, Name: a.Name, OriginalName: a.OriginalName, Path: attachments.WorkspacePath(a), Size: a.Size,
		SHA256: a.SHA256, DeclaredType: a.DeclaredType, DetectedType: a.DetectedType, Classification: a.Classification,
		Uploader: a.Uploader, CreatedAt: a.CreatedAt.UTC(), InWorkspace: a.WrittenSandbox != ""}
}

func (s *Server) attachmentService() (*attachments.Service, error) {
	if s.cfg.Attachments == nil {
		return nil, errorf(http.StatusNotImplemented, CodeNoAttachments, "this harness keeps no attachments; the operator turns them on with serve's attachment flags")
	}
	return s.cfg.Attachments, nil
}

// postAttachment stores the request body as an attachment of the session: streamed to
// its store, never held whole by this handler, capped (413 past the cap, checked on
// Content-Length first when there is one). The name comes from ?name=, the declared
// type from Content-Type, the classification from ?classification= (untrusted when
// absent). Nothing is provisioned: the file reaches the workspace with a tool call.
func (s *Server) postAttachment(w http.ResponseWriter, r *http.Request, ss store.Session) error {
	svc, err := s.attachmentService()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	name := q.Get("name")
	if name == "" {
		return errorf(http.StatusBadRequest, CodeBadRequest, "name is missing: send the file's name as ?name=report.pdf and its bytes as the body")
	}
	declared := ""
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err == nil && mt != "application/octet-stream" {
			declared = mt
		}
	}
	limit := svc.MaxBytesOrDefault()
	if r.ContentLength > limit {
		return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "the attachment has %d bytes, over the cap of %d per attachment", r.ContentLength, limit)
	}
	a, err := svc.Put(r.Context(), ss.ID, attachments.Upload{Name: name, DeclaredType: declared, Classification: q.Get("classification"), Uploader: ss.Owner},
		http.MaxBytesReader(w, r.Body, limit+1))
	if err != nil {
		return attachmentError(err)
	}
	w.Header().Set("Location", "/api/v1/sessions/"+ss.ID+"/attachments/"+a.ID)
	writeJSON(w, http.StatusCreated, attachmentOf(a))
	return nil
}

// attachmentError maps the attachment service's refusals to answers.
func attachmentError(err error) error {
	switch {
	case errors.Is(err, attachments.ErrTooLarge):
		return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "%s", err.Error())
	case errors.Is(err, store.ErrAttachmentName):
		// Two uploads of one name at once: the other took it between the name's choice
		// and the insert.
		return errorf(http.StatusConflict, CodeBusy, "%s; send the file again (it gets a name of its own)", err.Error())
	case errors.Is(err, attachments.ErrTooMany):
		return errorf(http.StatusConflict, CodeUnprocessable, "%s", err.Error())
	case errors.Is(err, attachments.ErrBadName), errors.Is(err, attachments.ErrEmpty):
		return errorf(http.StatusBadRequest, CodeBadRequest, "%s", err.Error())
	case errors.Is(err, attachments.ErrBadClassification):
		return errorf(http.StatusBadRequest, CodeBadRequest, "classification: %s", err.Error())
	case errors.Is(err, store.ErrNotFound):
		return errorf(http.StatusNotFound, CodeNotFound, "%s", err.Error())
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "the attachment is over the cap of %d bytes", mbe.Limit-1)
	}
	return err
}

func (s *Server) listAttachments(w http.ResponseWriter, r *http.Request, ss store.Session) error {
	if _, err := s.attachmentService(); err != nil {
		return err
	}
	as, err := s.cfg.Store.ListAttachments(r.Context(), ss.ID)
	if err != nil {
		return err
	}
	out := make([]attachmentJSON, 0, len(as))
	for _, a := range as {
		out = append(out, attachmentOf(a))
	}
	writeJSON(w, http.StatusOK, map[string]any{"attachments": out})
	return nil
}

func (s *Server) getAttachment(w http.ResponseWriter, r *http.Request, ss store.Session) error {
	if _, err := s.attachmentService(); err != nil {
		return err
	}
	a, err := s.cfg.Store.GetAttachment(r.Context(), ss.ID, r.PathValue("att"))
	if err != nil {
		return attachmentError(err)
	}
	writeJSON(w, http.StatusOK, attachmentOf(a))
	return nil
}

// deleteAttachment removes an attachment; a message that carried it keeps its record,
// and a file already written into the sandbox stays there.
func (s *Server) deleteAttachment(w http.ResponseWriter, r *http.Request, ss store.Session) error {
	svc, err := s.attachmentService()
	if err != nil {
		return err
	}
	if err := svc.Delete(r.Context(), ss.ID, r.PathValue("att")); err != nil {
		return attachmentError(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// messageAttachments resolves the attachments a message names, all of the session's
// (another session's, or another user's, is 404 like a missing one).
func (s *Server) messageAttachments(r *http.Request, ss store.Session, ids []string) ([]events.Attachment, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	svc, err := s.attachmentService()
	if err != nil {
		return nil, err
	}
	as, err := svc.Resolve(r.Context(), ss.ID, ids)
	if err != nil {
		return nil, attachmentError(err)
	}
	out := make([]events.Attachment, 0, len(as))
	for _, a := range as {
		out = append(out, attachments.Event(a))
	}
	return out, nil
}
