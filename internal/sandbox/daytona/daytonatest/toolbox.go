package daytonatest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// toolboxTarget resolves the sandbox of a toolbox call: it must exist and be started. It
// returns the box, the sandbox id and the env (sandbox env plus the secret placeholders
// fixed when it started).
func (s *Server) toolboxTarget(w http.ResponseWriter, r *http.Request) (box, string, map[string]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.findSandbox(r.PathValue("sandboxId"))
	if sb == nil || sb.ID != r.PathValue("sandboxId") {
		writeErr(w, r, 404, "sandbox not found")
		return nil, "", nil, false
	}
	if sb.State != "started" {
		writeErr(w, r, 400, "Sandbox is not running")
		return nil, "", nil, false
	}
	return guard(s.bx, sb), sb.ID, sb.processEnv(), true // secretenv.go
}

// fileErr answers a box error the way the daemon does.
func fileErr(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, sandbox.ErrNotFound):
		writeErr(w, r, 404, "file not found: "+err.Error())
	case errors.Is(err, sandbox.ErrTooLarge):
		writeErr(w, r, 413, err.Error())
	default:
		writeErr(w, r, 400, err.Error())
	}
}

func (s *Server) execute(w http.ResponseWriter, r *http.Request) {
	bx, id, env, ok := s.toolboxTarget(w, r)
	if !ok {
		return
	}
	var b struct {
		Command string            `json:"command"`
		Cwd     string            `json:"cwd"`
		Envs    map[string]string `json:"envs"`
		Timeout int               `json:"timeout"`
	}
	if !decode(w, r, &b) {
		return
	}
	if strings.TrimSpace(b.Command) == "" {
		writeErr(w, r, 400, "command is required")
		return
	}
	limit := execLimit
	if b.Timeout > 0 && time.Duration(b.Timeout)*time.Second < limit {
		limit = time.Duration(b.Timeout) * time.Second
	}
	maps.Copy(env, b.Envs)
	// The daemon runs the command without the request's context
	// (apps/daemon/pkg/toolbox/process/execute.go, v0.190: exec.Command, killed only by
	// its timeout's timer): a client that goes away leaves it running.
	res, err := bx.exec(context.WithoutCancel(r.Context()), id, b.Command, b.Cwd, env, limit)
	switch {
	case err != nil:
		writeErr(w, r, 400, err.Error())
	case res.timedOut: // apps/daemon/pkg/toolbox/process/execute.go:98 (v0.190)
		writeErr(w, r, http.StatusRequestTimeout, "command execution timeout")
	default:
		writeJSON(w, 200, map[string]any{"exitCode": res.code, "result": res.out})
	}
}

// onFile serves a files call: it resolves the started sandbox, reads the path query
// parameter (required unless optional) and answers an error of fn the way the daemon
// does.
func (s *Server) onFile(w http.ResponseWriter, r *http.Request, optional bool, fn func(bx box, id, p string) error) {
	bx, id, _, ok := s.toolboxTarget(w, r)
	if !ok {
		return
	}
	p := r.URL.Query().Get("path")
	if p == "" && !optional {
		writeErr(w, r, 400, "path is required")
		return
	}
	if err := fn(bx, id, p); err != nil {
		fileErr(w, r, err)
	}
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	s.onFile(w, r, false, func(bx box, id, p string) error {
		var data io.Reader = r.Body
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); strings.HasPrefix(mt, "multipart/") {
			f, _, err := r.FormFile("file")
			if err != nil {
				return errors.New("multipart field file is required")
			}
			defer f.Close()
			data = f
		}
		if err := bx.write(id, p, data); err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(w).Encode(map[string]string{"name": path.Base(p), "path": p, "type": "file"})
	})
}

func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	s.onFile(w, r, true, func(bx box, id, p string) error {
		b, err := bx.read(id, p)
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(b)
		return nil
	})
}

// onFileJSON serves a files call whose answer is what read returns, as JSON: the listing
// and the stat calls differ only in the box method they ask.
func onFileJSON[T any](s *Server, w http.ResponseWriter, r *http.Request, optional bool, read func(bx box, id, p string) (T, error)) {
	s.onFile(w, r, optional, func(bx box, id, p string) error {
		v, err := read(bx, id, p)
		if err != nil {
			return err
		}
		writeJSON(w, 200, v)
		return nil
	})
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	onFileJSON(s, w, r, true, box.list)
}

func (s *Server) fileInfo(w http.ResponseWriter, r *http.Request) {
	onFileJSON(s, w, r, false, box.stat)
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) {
	s.onFile(w, r, false, func(bx box, id, p string) error {
		if err := bx.del(id, p, r.URL.Query().Get("recursive") == "true"); err != nil {
			return err
		}
		w.WriteHeader(204)
		return nil
	})
}
