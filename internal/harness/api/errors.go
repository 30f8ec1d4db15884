package api

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// Error is an API error: the status it is answered with and the body
// {"error": {"code": ..., "message": ...}}. Handlers return one (errorf); anything else
// they return is an internal error, answered 500 without its text (logged with an id
// that the answer names).
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// errorf is an Error with a formatted message.
func errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error codes that clients branch on.
const (
	CodeBadJSON          = "bad_json"
	CodeBadRequest       = "bad_request"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeAdminOnly        = "admin_only"
	CodeCSRF             = "csrf"
	CodeBadOrigin        = "bad_origin"
	CodeNotFound         = "not_found"
	CodeMethod           = "method_not_allowed"
	CodeBusy             = "session_busy"
	CodeNotRunning       = "not_running"
	CodeDecided          = "already_decided"
	CodeTooLarge         = "body_too_large"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeUnprocessable    = "unprocessable"
	CodeUnknownAgent     = "unknown_agent"
	CodeAgentNotReady    = "agent_not_ready"
	CodeBadEnvironment   = "bad_environment"
	CodeDownloadsOff     = "downloads_disabled"
	CodeNotOffered       = "not_offered"
	CodeExpired          = "expired"
	CodeDigestMismatch   = "digest_mismatch"
	CodeFileTooLarge     = "file_too_large"
	CodeNotRegular       = "not_regular_file"
	CodeNoSandbox        = "no_sandbox"
	CodeSandboxArchived  = "sandbox_archived"
	CodeMalware          = "malware"
	CodeExecutable       = "executable"
	CodeRecipient        = "recipient"
	CodeScannerDown      = "scanner_unavailable"
	CodeUnavailable      = "unavailable"
	CodeInternal         = "internal"
)

// notFound is the answer for anything the caller may not see, whether or not it exists:
// another user's session, its sandbox or its files are never told apart from nothing.
func notFound(what string) *Error {
	return errorf(http.StatusNotFound, CodeNotFound, "%s not found", what)
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeError answers err: an *Error as it says, anything else as a 500 whose id is in
// the log beside the real error.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		id := randomHex(6)
		s.log.Error("internal error", "id", id, "method", r.Method, "path", r.URL.Path, "err", err)
		e = errorf(http.StatusInternalServerError, CodeInternal, "internal error (reference %s in the harness log)", id)
	}
	s.metrics.apiError(e.Code)
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="trueforge"`)
	}
	writeJSON(w, e.Status, map[string]*Error{"error": e})
}

// checker is a request body that checks its own fields (the ones it requires):
// decodeJSON runs the check once the body is decoded, so no handler can forget it.
type checker interface{ check() error }

// decodeJSON reads a request body of at most MaxBodyBytes into v: JSON only (415
// otherwise), no unknown fields, one value, every problem named (the field, the offset),
// then v's own check when it has one (checker).
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "the request body must be JSON (Content-Type: application/json), not %q", ct)
		}
	} else {
		return errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "the request body must be JSON: send Content-Type: application/json")
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, s.cfg.MaxBodyBytes)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return jsonError(err, s.cfg.MaxBodyBytes)
		}
		return errorf(http.StatusBadRequest, CodeBadJSON, "the request body must hold one JSON object, and it has more after it")
	}
	if c, ok := v.(checker); ok {
		return c.check()
	}
	return nil
}

// jsonError names what is wrong with a request body.
func jsonError(err error, limit int64) *Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "the request body is over %d bytes", limit)
	case errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, CodeBadJSON, "the request body is empty; send a JSON object")
	case errors.As(err, &syn):
		return errorf(http.StatusBadRequest, CodeBadJSON, "the request body is not valid JSON at byte %d: %v", syn.Offset, err)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return errorf(http.StatusBadRequest, CodeBadJSON, "the request body must be a JSON object, not %s", typ.Value)
		}
		return errorf(http.StatusBadRequest, CodeBadJSON, "field %q must be %s, not %s", typ.Field, typ.Type, typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errorf(http.StatusBadRequest, CodeBadJSON, "unknown field %s in the request body", strings.TrimPrefix(err.Error(), "json: unknown field "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, CodeBadJSON, "the request body ends in the middle of its JSON")
	}
	return errorf(http.StatusBadRequest, CodeBadJSON, "the request body is not valid JSON: %v", err)
}

// required refuses an empty string field, naming it.
func required(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return errorf(http.StatusBadRequest, CodeBadJSON, "field %q is required", field)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
