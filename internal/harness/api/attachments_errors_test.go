package api

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/attachments"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Each refusal of the attachment service is an answer the client can act on, never a
// 500: a name taken by a concurrent upload too.
func TestAttachmentErrors(t *testing.T) {
	for err, status := range map[error]int{
		fmt.Errorf("x: %w", store.ErrAttachmentName):          http.StatusConflict,
		fmt.Errorf("x: %w", attachments.ErrTooMany):           http.StatusConflict,
		fmt.Errorf("x: %w", attachments.ErrTooLarge):          http.StatusRequestEntityTooLarge,
		fmt.Errorf("x: %w", attachments.ErrBadName):           http.StatusBadRequest,
		fmt.Errorf("x: %w", attachments.ErrEmpty):             http.StatusBadRequest,
		fmt.Errorf("x: %w", attachments.ErrBadClassification): http.StatusBadRequest,
		fmt.Errorf("attachments[0]: %w", store.ErrNotFound):   http.StatusNotFound,
		&http.MaxBytesError{Limit: 11}:                        http.StatusRequestEntityTooLarge,
	} {
		var e *Error
		if !errors.As(attachmentError(err), &e) || e.Status != status {
			t.Errorf("%v: %v, want status %d", err, attachmentError(err), status)
		}
	}
}
