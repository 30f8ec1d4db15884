package daytonatest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The toolbox's three upload routes, as daemons of different ages have them:
//
//   - POST /files/upload?path (multipart field file; 200, empty body): v0.190 only
//     (apps/daemon/pkg/toolbox/fs/upload_file.go, gin's SaveUploadedFile, which creates
//     the parent directories; routed at apps/daemon/pkg/toolbox/server.go:189). The
//     v0.205 toolbox dropped it: daytona/clients openapi-specs/toolbox.json (v0.205.1)
//     lists /files/bulk-upload and /files/upload-v2 and no /files/upload, so a v0.205
//     daemon answers it as any route it does not have.
//   - POST /files/bulk-upload (multipart files[i].path then files[i].file; parents
//     created, files overwritten; 200 {files}, or 400 {errors, files} naming each
//     failure): v0.190 (apps/daemon/pkg/toolbox/fs/upload_files.go) and v0.205.
//   - POST /files/upload-v2?path (multipart field file or a raw body; 200 {name, path,
//     type}): v0.205 only (daytona/clients openapi-specs/toolbox.json).
//
// A route the daemon lacks gets gin's 404, "404 page not found" in plain text
// (apps/daemon/pkg/toolbox/server.go, v0.190, sets no NoRoute). The emulator is a v0.205
// daemon by default; WithoutUploadV2 makes it a v0.190 (or self-hosted) one, with
// /files/upload and without /files/upload-v2.

// WithoutUploadV2 makes the toolbox a v0.190 (or self-hosted) daemon's: /files/upload-v2
// answers 404 in plain text, as a daemon without it does, and /files/upload is served.
func WithoutUploadV2() Option { return func(c *config) { c.noUploadV2 = true } }

// ginNoRoute answers as gin does a route the daemon has no handler for.
func ginNoRoute(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, "404 page not found")
}

// uploadV2 serves /files/upload-v2, unless the emulated daemon is too old for it.
func (s *Server) uploadV2(w http.ResponseWriter, r *http.Request) {
	if s.cfg.noUploadV2 {
		ginNoRoute(w)
		return
	}
	s.upload(w, r)
}

// uploadV1 serves v0.190's /files/upload: a multipart field file, an empty 200. A v0.205
// daemon (the default) has no such route.
func (s *Server) uploadV1(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.noUploadV2 {
		ginNoRoute(w)
		return
	}
	s.onFile(w, r, false, func(bx box, id, p string) error {
		f, _, err := r.FormFile("file")
		if err != nil {
			return fmt.Errorf("multipart field file is required: %w", err)
		}
		defer f.Close()
		if err := bx.write(id, p, f); err != nil {
			return err
		}
		w.WriteHeader(http.StatusOK)
		return nil
	})
}

// bulkUpload serves /files/bulk-upload as upload_files.go does: each files[i].path part
// names where the files[i].file part after it goes; failures are collected and answered
// together as 400 {errors, files}.
func (s *Server) bulkUpload(w http.ResponseWriter, r *http.Request) {
	bx, id, _, ok := s.toolboxTarget(w, r)
	if !ok {
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": []string{"invalid multipart form"}})
		return
	}
	type fileResult struct {
		Path  string `json:"path"`
		Bytes int64  `json:"bytes"`
	}
	dests := map[string]string{}
	errs := []string{}
	files := []fileResult{}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("reading part: %v", err))
			break
		}
		name := part.FormName()
		idx := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(name, "files["), "].path"), "].file")
		switch {
		case strings.HasSuffix(name, ".path"):
			b, err := io.ReadAll(part)
			dest := strings.TrimSpace(string(b))
			switch {
			case err != nil:
				errs = append(errs, fmt.Sprintf("path[%s]: %v", idx, err))
			case dest == "":
				errs = append(errs, fmt.Sprintf("path[%s]: empty path", idx))
			default:
				dests[idx] = dest
			}
		case strings.HasSuffix(name, ".file"):
			dest, ok := dests[idx]
			if !ok {
				errs = append(errs, fmt.Sprintf("file[%s]: missing .path metadata", idx))
				continue
			}
			cr := &countingReader{r: part}
			if err := bx.write(id, dest, cr); err != nil {
				errs = append(errs, fmt.Sprintf("%s: create: %v", dest, err))
				continue
			}
			files = append(files, fileResult{Path: dest, Bytes: cr.n})
		}
	}
	if len(errs) > 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": errs, "files": files})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": files})
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
