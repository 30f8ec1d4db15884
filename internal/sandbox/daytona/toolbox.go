package daytona

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"mime/multipart"
	"net/http"
	"net/url"
	pathpkg "path"
	"strings"
	"time"
)

// ExecuteRequest is the toolbox's ExecuteRequest. Timeout is in seconds; the daemon only
// enforces it when > 0 and then answers 408. Keep secret values out of Command.
type ExecuteRequest struct {
	Command string            `json:"command"`
	Cwd     string            `json:"cwd,omitempty"`
	Envs    map[string]string `json:"envs,omitempty"`
	Timeout int               `json:"timeout,omitempty"`
}

// ExecuteResponse has the exit code and the combined stdout+stderr.
type ExecuteResponse struct {
	ExitCode int    `json:"exitCode"`
	Result   string `json:"result"`
}

// toolboxURL is {toolboxProxyUrl}/{sandboxId}{path}.
func toolboxURL(sb *Sandbox, path string) (string, error) {
	if sb == nil || sb.ToolboxProxyURL == "" || sb.ID == "" {
		return "", errors.New("daytona: sandbox has no toolboxProxyUrl")
	}
	return strings.TrimRight(sb.ToolboxProxyURL, "/") + "/" + esc(sb.ID) + path, nil
}

// Execute runs a command in a started sandbox (POST /process/execute). It is not retried
// after a 5xx, since the command may have run.
func (c *Client) Execute(ctx context.Context, sb *Sandbox, req ExecuteRequest) (*ExecuteResponse, error) {
	u, err := toolboxURL(sb, "/process/execute")
	if err != nil {
		return nil, err
	}
	var out ExecuteResponse
	// The daemon answers when the command ends or its timeout (seconds) passes, then 408.
	wait := DefaultRequestTimeout
	if req.Timeout > 0 {
		wait = time.Duration(req.Timeout)*time.Second + 30*time.Second
	}
	if _, err := c.do(ctx, &request{method: http.MethodPost, url: u, body: req, timeout: wait}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// transferTimeout bounds one attempt of a file upload or download: files go up to 64 MiB
// (the runtime's cap), which a slow link needs minutes for.
const transferTimeout = 10 * time.Minute

// UploadFile writes data to path in the sandbox, its parents created and an existing
// file overwritten, through POST /files/bulk-upload with one file (multipart
// files[0].path, then files[0].file), which every daemon has: the v0.190 daemon
// (apps/daemon/pkg/toolbox/fs/upload_files.go) and the v0.205 OpenAPI document.
// /files/upload-v2 is recent (public since 2026-07-25); older and self-hosted daemons
// answer it 404, as the proxy answers for a sandbox that is gone, so a fall-back on 404
// could not tell the two apart. The Go SDK streams its uploads through bulk-upload too.
// A failure is a 400 whose errors name the file.
func (c *Client) UploadFile(ctx context.Context, sb *Sandbox, path string, data []byte) error {
	u, err := toolboxURL(sb, "/files/bulk-upload")
	if err != nil {
		return err
	}
	body, ctype, err := bulkUploadBody(path, data)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, &request{method: http.MethodPost, url: u, raw: body, rawType: ctype, idempotent: true, timeout: transferTimeout}, nil)
	return err
}

// bulkUploadBody is the multipart body of a bulk upload of data to path.
func bulkUploadBody(path string, data []byte) ([]byte, string, error) {
	var b bytes.Buffer
	b.Grow(len(data) + len(path) + 512)
	mw := multipart.NewWriter(&b)
	if err := mw.WriteField("files[0].path", path); err != nil {
		return nil, "", err
	}
	fw, err := mw.CreateFormFile("files[0].file", pathpkg.Base(path))
	if err != nil {
		return nil, "", err
	}
	if _, err := fw.Write(data); err != nil {
		return nil, "", err
	}
	if err := mw.Close(); err != nil {
		return nil, "", err
	}
	return b.Bytes(), mw.FormDataContentType(), nil
}

// DownloadFile reads a file from the sandbox (GET /files/download).
func (c *Client) DownloadFile(ctx context.Context, sb *Sandbox, path string) ([]byte, error) {
	u, err := toolboxURL(sb, "/files/download")
	if err != nil {
		return nil, err
	}
	return c.do(ctx, &request{method: http.MethodGet, url: u, query: url.Values{"path": {path}}, idempotent: true, timeout: transferTimeout}, nil)
}

// FileInfo is the toolbox's FileInfo.
type FileInfo struct {
	Name        string `json:"name"`
	Size        int64  `json:"size"`
	Mode        string `json:"mode"`
	Permissions string `json:"permissions"`
	Owner       string `json:"owner"`
	Group       string `json:"group"`
	IsDir       bool   `json:"isDir"`
	ModifiedAt  string `json:"modifiedAt"` // RFC 3339
}

// ListFiles lists a directory of the sandbox (GET /files?path).
func (c *Client) ListFiles(ctx context.Context, sb *Sandbox, path string) ([]FileInfo, error) {
	u, err := toolboxURL(sb, "/files")
	if err != nil {
		return nil, err
	}
	var out []FileInfo
	_, err = c.do(ctx, &request{method: http.MethodGet, url: u, query: url.Values{"path": {path}}, idempotent: true}, &out)
	return out, err
}

// StatFile describes one file of the sandbox (GET /files/info?path).
func (c *Client) StatFile(ctx context.Context, sb *Sandbox, path string) (*FileInfo, error) {
	u, err := toolboxURL(sb, "/files/info")
	if err != nil {
		return nil, err
	}
	return call[FileInfo](ctx, c, &request{method: http.MethodGet, url: u, query: url.Values{"path": {path}}, idempotent: true})
}

// SetFileMode sets a file's permission bits (POST /files/permissions?path&mode, mode as
// four octal digits): v0.190 apps/daemon/pkg/toolbox/fs/set_file_permissions.go, still in
// the v0.205 toolbox spec. The daemon stats the path (404 missing, 403 unreadable) and
// chmods it; a refused chmod (EPERM: not the file's owner) is a 400. Its refusals have
// no body.
func (c *Client) SetFileMode(ctx context.Context, sb *Sandbox, path string, mode fs.FileMode) error {
	u, err := toolboxURL(sb, "/files/permissions")
	if err != nil {
		return err
	}
	q := url.Values{"path": {path}, "mode": {fmt.Sprintf("%04o", mode.Perm())}}
	_, err = c.do(ctx, &request{method: http.MethodPost, url: u, query: q, idempotent: true}, nil)
	return err
}

// DeleteFile removes a file, or with recursive a directory tree (DELETE /files).
func (c *Client) DeleteFile(ctx context.Context, sb *Sandbox, path string, recursive bool) error {
	u, err := toolboxURL(sb, "/files")
	if err != nil {
		return err
	}
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "true")
	}
	_, err = c.do(ctx, &request{method: http.MethodDelete, url: u, query: q, idempotent: true}, nil)
	return err
}
