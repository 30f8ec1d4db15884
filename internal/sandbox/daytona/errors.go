package daytona

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// APIError is a non-2xx answer from the API or the toolbox.
type APIError struct {
	Method string
	URL    string // without query
	Status int
	// Message is the API's message (validation messages joined with ", ").
	Message string
	// Code is the optional machine code (API `code`/`error_code`, toolbox DaemonErrorCode).
	Code string
	// Permission is the permission the message names, for 403s that name one.
	Permission string
	// header keeps the response headers for retry decisions.
	header http.Header
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	s := fmt.Sprintf("daytona: %s %s: %d %s", e.Method, e.URL, e.Status, msg)
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Permission != "" && !strings.Contains(msg, e.Permission) {
		s += "; missing permission " + e.Permission
	}
	return s
}

// Is makes errors.Is(err, sandbox.ErrNotFound) hold for 404s.
// Backend names Daytona as the API that answered (sandbox.APIError).
func (e *APIError) Backend() string { return "Daytona" }

func (e *APIError) Is(target error) bool {
	return target == sandbox.ErrNotFound && e.Status == http.StatusNotFound
}

var permRE = regexp.MustCompile(`\b(?:read|write|delete|manage):[a-z_]+\b`)

func newAPIError(method, u string, resp *http.Response, body []byte) *APIError {
	e := &APIError{Method: method, URL: u, Status: resp.StatusCode, header: resp.Header}
	var b struct {
		Message   json.RawMessage `json:"message"`
		Code      json.RawMessage `json:"code"`
		ErrorCode string          `json:"error_code"`
		Error     string          `json:"error"`
		Errors    []string        `json:"errors"` // the toolbox's bulk-upload
	}
	if json.Unmarshal(body, &b) == nil {
		e.Message = flatten(b.Message)
		e.Code = flatten(b.Code)
		if e.Code == "" {
			e.Code = b.ErrorCode
		}
		if e.Message == "" {
			e.Message = strings.Join(b.Errors, ", ")
		}
		if e.Message == "" {
			e.Message = b.Error
		}
	} else {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 512 {
			e.Message = e.Message[:512] + "…"
		}
	}
	if e.Status == http.StatusForbidden {
		e.Permission = permRE.FindString(e.Message)
	}
	return e
}

// flatten turns a JSON string, number or string array into text.
func flatten(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil {
		return strings.Join(ss, ", ")
	}
	return strings.Trim(string(raw), `"`)
}

func asAPI(err error) (*APIError, bool) {
	var e *APIError
	ok := errors.As(err, &e)
	return e, ok
}

func hasStatus(err error, status int) bool {
	e, ok := asAPI(err)
	return ok && e.Status == status
}

// IsNotFound reports a 404.
func IsNotFound(err error) bool { return hasStatus(err, http.StatusNotFound) }

// IsConflict reports a 409 (duplicate name, or a state change in progress).
func IsConflict(err error) bool { return hasStatus(err, http.StatusConflict) }

// IsRateLimited reports a 429.
func IsRateLimited(err error) bool { return hasStatus(err, http.StatusTooManyRequests) }

// IsForbidden reports a 403 and returns the permission the API message names ("" if none).
// A *MissingPermissionsError also counts, with its first missing permission.
func IsForbidden(err error) (bool, string) {
	var m *MissingPermissionsError
	if errors.As(err, &m) {
		return true, m.Missing[0]
	}
	e, ok := asAPI(err)
	if !ok || e.Status != http.StatusForbidden {
		return false, ""
	}
	return true, e.Permission
}

// IsStateChangeInProgress reports the 409 the API gives while a sandbox changes state.
func IsStateChangeInProgress(err error) bool {
	e, ok := asAPI(err)
	return ok && isStateChange(e)
}

func isStateChange(e *APIError) bool {
	return e.Status == http.StatusConflict && strings.Contains(strings.ToLower(e.Message), "state change in progress")
}

// MissingPermissionsError says which permissions an API key lacks.
type MissingPermissionsError struct {
	KeyName string
	Missing []string
}

func (e *MissingPermissionsError) Error() string {
	return fmt.Sprintf("daytona: API key %q is missing permission(s): %s", e.KeyName, strings.Join(e.Missing, ", "))
}
