package daytonatest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// toolboxTarget resolves the sandbox of a toolbox call: it must exist and be started. It
// returns the sandbox directory and the env (sandbox env plus secret placeholders).
func (s *Server) toolboxTarget(w http.ResponseWriter, r *http.Request) (string, map[string]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.findSandbox(r.PathValue("sandboxId"))
	if sb == nil || sb.ID != r.PathValue("sandboxId") {
		writeErr(w, r, 404, "sandbox not found")
		return "", nil, false
	}
	if sb.State != "started" {
		writeErr(w, r, 400, "Sandbox is not running")
		return "", nil, false
	}
	env := maps.Clone(sb.Env)
	if env == nil {
		env = map[string]string{}
	}
	for _, m := range sb.Secrets {
		for k, name := range m {
			if sec := s.secretByName(name); sec != nil {
				env[k] = sec.Placeholder
			}
		}
	}
	return s.sandboxDir(sb.ID), env, true
}

// inside maps a sandbox path (absolute or relative to the root) into dir.
func inside(dir, p string) string {
	return filepath.Join(dir, filepath.Clean("/"+p))
}

func (s *Server) execute(w http.ResponseWriter, r *http.Request) {
	dir, env, ok := s.toolboxTarget(w, r)
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
	limit := s.cfg.execMax
	if b.Timeout > 0 && time.Duration(b.Timeout)*time.Second < limit {
		limit = time.Duration(b.Timeout) * time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh")
	cmd.Stdin = strings.NewReader(b.Command)
	cmd.Dir = dir
	if b.Cwd != "" {
		cmd.Dir = inside(dir, b.Cwd)
	}
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for k, v := range b.Envs {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	killGroup(cmd)
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		writeErr(w, r, http.StatusRequestTimeout, "command execution timeout")
		return
	}
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		writeErr(w, r, 400, err.Error())
		return
	}
	writeJSON(w, 200, map[string]any{"exitCode": code, "result": out.String()})
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	dir, _, ok := s.toolboxTarget(w, r)
	if !ok {
		return
	}
	p := r.URL.Query().Get("path")
	if p == "" {
		writeErr(w, r, 400, "path is required")
		return
	}
	var data io.Reader = r.Body
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); strings.HasPrefix(mt, "multipart/") {
		f, _, err := r.FormFile("file")
		if err != nil {
			writeErr(w, r, 400, "multipart field file is required")
			return
		}
		defer f.Close()
		data = f
	}
	dst := inside(dir, p)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		writeErr(w, r, 400, err.Error())
		return
	}
	f, err := os.Create(dst)
	if err == nil {
		_, err = io.Copy(f, data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		writeErr(w, r, 400, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"name": filepath.Base(p), "path": p, "type": "file"})
}

func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	dir, _, ok := s.toolboxTarget(w, r)
	if !ok {
		return
	}
	b, err := os.ReadFile(inside(dir, r.URL.Query().Get("path")))
	if errors.Is(err, os.ErrNotExist) {
		writeErr(w, r, 404, "file not found")
		return
	}
	if err != nil {
		writeErr(w, r, 400, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(b)
}
