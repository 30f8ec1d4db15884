package daytonatest

import (
	"encoding/json"
	"maps"
	"net/http"
)

// replaceLabels is PUT /sandbox/{sandboxIdOrName}/labels, v0.190's replaceLabels:
//
//   - apps/api/src/sandbox/controllers/sandbox.controller.ts:648-687: write:sandboxes
//     (:664); SandboxAccessGuard answers an unknown sandbox 404 "Sandbox with ID or name X
//     not found" (guards/sandbox-access.guard.ts:70); the answer is toSandboxDto of the
//     updated sandbox (:686), the whole Sandbox, although @ApiResponse (:657-661), and so
//     the OpenAPI document, name SandboxLabels ({labels}).
//   - services/sandbox.service.ts:2837-2849: findOneByIdOrName (by id, then name; not a
//     destroyed sandbox, nor an errored one being deleted, :1739-1786), then the labels
//     are replaced whole. No state is refused: a stopped, archived, errored or deleted
//     (destroying) sandbox is relabelled too.
//   - repositories/sandbox.repository.ts:79-129: the update stamps updatedAt (:117) and
//     changes no lastActivityAt (only a state change does, :119-122). It is conditioned on
//     the state, desiredState and pending read before (:103-116), else 409 "Sandbox was
//     modified by another operation" (errors/sandbox-conflict.error.ts:10); the emulator
//     serves one request at a time and never meets that, InjectFaultsMessage can.
//   - The body, SandboxLabelsDto (dto/sandbox.dto.ts:402-411), has no validation
//     decorators and the ValidationPipe only transforms (apps/api/src/main.ts:72-76), so
//     Daytona stores whatever labels is (null, a string, numbers). The emulator refuses,
//     400, a labels that is missing or not an object of strings, and any other property
//     (decodeStrict), so that a client sending what Daytona would store wrongly fails a
//     test.
func (s *Server) replaceLabels(w http.ResponseWriter, r *http.Request) {
	sb := s.sandboxOr404(w, r)
	if sb == nil {
		return
	}
	var raw struct {
		Labels json.RawMessage `json:"labels"`
	}
	if !decodeStrict(w, r, &raw) {
		return
	}
	var labels map[string]string
	if err := json.Unmarshal(raw.Labels, &labels); err != nil || labels == nil {
		writeErr(w, r, http.StatusBadRequest, "daytonatest: labels must be an object of string values")
		return
	}
	sb.Labels, sb.UpdatedAt = maps.Clone(labels), s.now()
	writeJSON(w, http.StatusOK, sb.dto())
}
