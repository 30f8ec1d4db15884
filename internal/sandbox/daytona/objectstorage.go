package daytona

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// PushAccess is StorageAccessDto, the answer of GET /object-storage/push-access: temporary
// S3 credentials that may put and get objects under the organization's prefix of bucket
// (Daytona v0.190 apps/api/src/object-storage/services/object-storage.service.ts grants
// s3:PutObject and s3:GetObject on {bucket}/{organizationId}/*).
type PushAccess struct {
	StorageURL     string `json:"storageUrl"`
	AccessKey      string `json:"accessKey"`
	Secret         string `json:"secret"`
	SessionToken   string `json:"sessionToken"`
	Bucket         string `json:"bucket"`
	OrganizationID string `json:"organizationId"`
	Region         string `json:"region"`
}

// PushAccess asks for temporary object storage credentials (GET /object-storage/push-access).
func (c *Client) PushAccess(ctx context.Context) (*PushAccess, error) {
	var a PushAccess
	if _, err := c.do(ctx, c.api(http.MethodGet, "/object-storage/push-access"), &a); err != nil {
		return nil, err
	}
	if a.Bucket == "" {
		// The SDKs' default bucket (sdk-go pkg/daytona/object_storage.go).
		a.Bucket = "daytona-volume-builds"
	}
	if a.Region == "" {
		a.Region = "us-east-1"
	}
	return &a, nil
}

// ContextKey is the object key of a build context tarball, where Daytona's runner reads it
// (v0.190 apps/runner/pkg/storage/minio_client.go: "{organizationId}/{hash}/context.tar").
func ContextKey(organizationID, hash string) string {
	return organizationID + "/" + hash + "/context.tar"
}

// objectURL is the path-style URL of key in a's bucket (the SDKs set UsePathStyle).
func (a *PushAccess) objectURL(key string) string {
	base := strings.TrimRight(a.StorageURL, "/")
	if !strings.Contains(base, "://") {
		base = "https://" + base
	}
	return base + "/" + uriEncode(a.Bucket) + "/" + escapeKey(key)
}

// escapeKey encodes each segment of an object key as SigV4 does, keeping the slashes,
// so that the path sent is the canonical URI signed.
func escapeKey(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = uriEncode(s)
	}
	return strings.Join(segs, "/")
}

// objectExists reports whether key is stored (HEAD: 200 yes, 404 no).
func (c *Client) objectExists(ctx context.Context, a *PushAccess, key string) (bool, error) {
	resp, err := c.s3(ctx, a, http.MethodHead, key, nil)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return false, nil
	case resp.StatusCode/100 == 2:
		return true, nil
	}
	return false, fmt.Errorf("daytona: object storage HEAD %s: %s", key, resp.Status)
}

// putObject uploads body under key.
func (c *Client) putObject(ctx context.Context, a *PushAccess, key string, body []byte) error {
	resp, err := c.s3(ctx, a, http.MethodPut, key, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("daytona: object storage PUT %s: %s: %s", key, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// s3 sends one S3 request signed with AWS Signature Version 4 (s3sign.go). The Daytona
// API token is never sent to object storage.
func (c *Client) s3(ctx context.Context, a *PushAccess, method, key string, body []byte) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.reqTimeout)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.objectURL(key), rd)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("daytona: object storage %s %s: %w", method, key, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-tar")
	}
	signV4(req, a, body, time.Now().UTC())
	resp, err := c.hc.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("daytona: object storage %s %s: %w", method, key, err)
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
