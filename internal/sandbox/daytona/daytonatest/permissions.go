package daytonatest

import (
	"errors"
	"io/fs"
	"net/http"
	"strconv"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// File modes, as the daemon's file calls leave them.
//
// An upload (bulk-upload, upload, upload-v2) opens its destination with os.Create
// (v0.190 apps/daemon/pkg/toolbox/fs/upload_files.go:90): O_TRUNC on a file that exists
// keeps that file's mode, and a new file gets 0666 less the daemon's umask. The daemon
// sets none (no Umask call in apps/daemon), so it runs with the container runtime's
// default umask, 0022: a new file is 0644 (newFileMode). The boxes write so whatever the
// emulator process's own umask is.
//
// POST /files/permissions?path&mode&owner&group is SetFilePermissions (v0.190
// apps/daemon/pkg/toolbox/fs/set_file_permissions.go, routed at server.go:189; still in
// clients v0.205.1 openapi-specs/toolbox.json): path required (400), os.Stat of the path
// (missing 404, permission 403, else 400, :49-61), mode parsed as octal (400 "invalid
// mode format", :64-68), os.Chmod (400 "failed to change mode", :71-74), then 200 with no
// body. Every refusal is c.AbortWithError, and gin's AbortWithStatus writes the status
// at once (gin v1.10.1 context.go: c.Writer.WriteHeaderNow()), so the error middleware
// finds the response written and adds nothing (libs/common-go/pkg/errors/middleware.go:
// 22-25): the daemon's refusals here are a bare status with an empty body.

// newFileMode is the mode a new uploaded file gets: os.Create's 0666 less umask 0022.
const newFileMode fs.FileMode = 0o666 &^ 0o022

// setFilePermissions serves POST /files/permissions. owner and group are not emulated
// (the emulator's local sandboxes have one user): they are refused with a 400 that says
// so, which no daemon answers.
func (s *Server) setFilePermissions(w http.ResponseWriter, r *http.Request) {
	bx, id, _, ok := s.toolboxTarget(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	p := q.Get("path")
	if p == "" {
		w.WriteHeader(http.StatusBadRequest) // set_file_permissions.go:37-40
		return
	}
	if q.Get("owner") != "" || q.Get("group") != "" {
		writeErr(w, r, http.StatusBadRequest, "daytonatest: owner and group are not emulated")
		return
	}
	if _, err := bx.stat(id, p); err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, sandbox.ErrNotFound):
			w.WriteHeader(http.StatusNotFound)
		case errors.Is(err, fs.ErrPermission):
			w.WriteHeader(http.StatusForbidden)
		default:
			w.WriteHeader(http.StatusBadRequest)
		}
		return
	}
	if m := q.Get("mode"); m != "" {
		n, err := strconv.ParseUint(m, 8, 32)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		// os.Chmod takes the permission bits of os.FileMode(n); octal 04000 and the like
		// are not Go's ModeSetuid bits, so only the permissions reach chmod(2).
		if err := bx.chmod(id, p, fs.FileMode(n).Perm()); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}
