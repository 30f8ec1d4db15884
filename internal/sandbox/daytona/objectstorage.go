package daytona

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// PushAccess is StorageAccessDto, the answer of GET /object-storage/push-access: temporary
// S3 credentials that may put and get objects under the organization's prefix of bucket
// and list prefixes under it (Daytona v0.190 apps/api/src/object-storage/services/
// object-storage.service.ts:50-72: s3:PutObject and s3:GetObject on
// {bucket}/{organizationId}/*, s3:ListBucket on {bucket} with s3:prefix {organizationId}
// or {organizationId}/*).
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
		// v0.205's StorageAccessDto requires region; v0.190's has none (apps/api/src/
		// sandbox/dto/storage-access-dto.ts:8-44). us-east-1 is the default of S3 and MinIO;
		// a bucket elsewhere refuses it naming its region, which s3 then signs for.
		a.Region = "us-east-1"
	}
	return &a, nil
}

// ContextKey is the object key of a build context tarball, where Daytona's runner reads it
// (v0.190 apps/runner/pkg/storage/minio_client.go: "{organizationId}/{hash}/context.tar").
func ContextKey(organizationID, hash string) string {
	return organizationID + "/" + hash + "/context.tar"
}

// s3Op is one S3 request: an object's (key set) or the bucket's (key "").
type s3Op struct {
	method, key string
	query       url.Values
	body        []byte
}

// what names op's target in errors.
func (op s3Op) what() string {
	if op.key != "" {
		return op.method + " " + op.key
	}
	return op.method + " ?" + canonicalQuery(op.query)
}

// url is op's path-style URL in a's bucket (the SDKs set UsePathStyle), path and query
// in SigV4's canonical encoding, which is what is signed.
func (a *PushAccess) url(op s3Op) string {
	base := strings.TrimRight(a.StorageURL, "/")
	if !strings.Contains(base, "://") {
		base = "https://" + base
	}
	u := base + "/" + uriEncode(a.Bucket)
	if op.key != "" {
		u += "/" + escapeKey(op.key)
	}
	if len(op.query) > 0 {
		u += "?" + canonicalQuery(op.query)
	}
	return u
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

// objectExists reports whether key is stored, by listing the bucket with key as the
// prefix, as the SDK checks for a context (clients v0.205 sdk-go/pkg/daytona/
// object_storage.go:195-207: ListObjectsV2 with Prefix and MaxKeys 1). Not HEAD: the
// push-access credentials may list only prefixes under the organization's
// (object-storage.service.ts:62-71) and have no plain s3:ListBucket, and without that S3
// answers a HEAD of a missing key 403, not 404 (AWS S3 API Reference, HeadObject,
// "Permissions"). The SDK lists the context's folder; this lists the key itself, so
// only the object the runner reads counts, and as the key sorts before every longer key
// it prefixes, one key of listing is enough.
func (c *Client) objectExists(ctx context.Context, a *PushAccess, key string) (bool, error) {
	op := s3Op{method: http.MethodGet, query: url.Values{"list-type": {"2"}, "prefix": {key}, "max-keys": {"1"}}}
	body, err := c.s3(ctx, a, op)
	if err != nil {
		return false, err
	}
	var res struct {
		Contents []struct {
			Key string `xml:"Key"`
		} `xml:"Contents"`
	}
	if err := xml.Unmarshal(body, &res); err != nil {
		return false, fmt.Errorf("daytona: object storage %s: reading ListBucketResult: %w", op.what(), err)
	}
	return len(res.Contents) > 0 && res.Contents[0].Key == key, nil
}

// putObject uploads body under key.
func (c *Client) putObject(ctx context.Context, a *PushAccess, key string, body []byte) error {
	_, err := c.s3(ctx, a, s3Op{method: http.MethodPut, key: key, body: body})
	return err
}

// maxS3Answer caps what is read of an S3 answer: a one-key listing or an error.
const maxS3Answer = 1 << 20

// contextUploadRate is the slowest uplink an object storage request is given time for,
// 128 KiB/s (about 1 Mbit/s): an attempt's deadline is the request timeout (60 s by
// default) plus its body's time at this rate, so a context of a few KiB gets about 60 s
// and the largest (sandbox.MaxContextBytes, 64 MiB) 60 s + 512 s, about 9.5 minutes,
// which is within the 10 minutes of a toolbox file transfer. The SDK sets no deadline of
// its own (clients v0.205 sdk-go/pkg/daytona/object_storage.go:302-307).
const contextUploadRate = 128 << 10

// s3Timeout is the deadline of one attempt of a request with a body of n bytes.
func (c *Client) s3Timeout(n int) time.Duration {
	return c.reqTimeout + time.Duration(n)*time.Second/contextUploadRate
}

// s3 sends op signed with AWS Signature Version 4 (s3sign.go) and returns the body of a
// 2xx answer. An attempt that fails in transport or with a 5xx is made once more (a
// listing and a PUT of the same bytes under the same key are both safe to repeat; the
// body is a byte slice, so it is sent again whole), unless the retry policy disables
// retries. An attempt that ran out of its deadline is not: the deadline is sized to the
// body, and a second one at the same speed would only double the wait. A refusal for a
// wrong region is signed again, once, for the region S3 names (issue 24 L15). The
// Daytona API token is never sent to object storage.
func (c *Client) s3(ctx context.Context, a *PushAccess, op s3Op) ([]byte, error) {
	attempts := 2
	if c.retry.MaxAttempts <= 1 {
		attempts = 1
	}
	resigned := false
	for attempt := 1; ; attempt++ {
		body, retry, err := c.s3Once(ctx, a, op)
		if r, ok := bucketRegion(err, a); ok && !resigned {
			// Signed for the wrong region (a server before v0.205 names none, and
			// us-east-1 was assumed): S3 names the bucket's, so sign for it, for this
			// request and the ones after it on a (the upload after the listing).
			a.Region, resigned = r, true
			attempt--
			continue
		}
		if err == nil || !retry || attempt >= attempts || ctx.Err() != nil {
			return body, err
		}
		select {
		case <-time.After(c.retry.backoff(attempt)):
		case <-ctx.Done():
			return nil, err
		}
	}
}

// bucketRegion is the bucket's region when err is S3's refusal of a signature made for
// another region (400 AuthorizationHeaderMalformed with <Region>).
func bucketRegion(err error, a *PushAccess) (string, bool) {
	var e *S3Error
	if !errors.As(err, &e) || e.Code != "AuthorizationHeaderMalformed" || e.Region == "" || e.Region == a.Region {
		return "", false
	}
	return e.Region, true
}

// s3Once makes one attempt of op; retry says whether a failure may be retried.
func (c *Client) s3Once(ctx context.Context, a *PushAccess, op s3Op) (_ []byte, retry bool, _ error) {
	ctx, cancel := context.WithTimeout(ctx, c.s3Timeout(len(op.body)))
	defer cancel()
	var rd io.Reader
	if op.body != nil {
		rd = bytes.NewReader(op.body)
	}
	req, err := http.NewRequestWithContext(ctx, op.method, a.url(op), rd)
	if err != nil {
		return nil, false, fmt.Errorf("daytona: object storage %s: %w", op.what(), err)
	}
	if op.body != nil {
		req.Header.Set("Content-Type", "application/x-tar")
	}
	signV4(req, a, op.body, time.Now().UTC())
	transport := func(err error) ([]byte, bool, error) {
		return nil, !errors.Is(err, context.DeadlineExceeded), fmt.Errorf("daytona: object storage %s: %w", op.what(), err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return transport(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxS3Answer))
	if err != nil {
		return transport(err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, resp.StatusCode >= 500, newS3Error(op.what(), resp.StatusCode, body, a)
	}
	return body, false, nil
}
