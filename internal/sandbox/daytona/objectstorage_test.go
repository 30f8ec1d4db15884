package daytona_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
)

// s3Answer is an S3 answer: its status and, but for a HEAD, its error code and region.
type s3Answer struct {
	status       int
	code, region string
	body         string
}

// s3Raw sends one request to the emulator's object storage, signed with a's credentials
// (daytona.SignS3); tamper, when set, changes the request after signing.
func s3Raw(t *testing.T, a *daytona.PushAccess, method, pathAndQuery string, body []byte, tamper func(*http.Request)) s3Answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, a.StorageURL+"/"+a.Bucket+pathAndQuery, rd)
	if err != nil {
		t.Fatal(err)
	}
	daytona.SignS3(req, a, body, time.Now().UTC())
	if tamper != nil {
		tamper(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Code   string `xml:"Code"`
		Region string `xml:"Region"`
	}
	_ = xml.Unmarshal(b, &e)
	return s3Answer{status: resp.StatusCode, code: e.Code, region: e.Region, body: string(b)}
}

func pushAccess(t *testing.T, c *daytona.Client) *daytona.PushAccess {
	t.Helper()
	a, err := c.PushAccess(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestObjectStoragePolicy: the emulator grants the push-access credentials what the
// v0.190 session policy grants (object-storage.service.ts:50-72): Put/GetObject under
// the organization's prefix, ListBucket only with a prefix under it, and a HEAD or GET
// of a missing key is 403 (no plain ListBucket), as on AWS.
func TestObjectStoragePolicy(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	a := pushAccess(t, c)
	org := a.OrganizationID
	key := "/" + org + "/abc/context.tar"
	cases := []struct {
		name, method, target string
		body                 []byte
		status               int
		code                 string
	}{
		{"HEAD of a missing key", "HEAD", key, nil, 403, ""},
		{"GET of a missing key", "GET", key, nil, 403, "AccessDenied"},
		{"PUT under the organization", "PUT", key, []byte("tar"), 200, ""},
		{"HEAD of a stored key", "HEAD", key, nil, 200, ""},
		{"PUT under another organization", "PUT", "/other-org/abc/context.tar", []byte("tar"), 403, "AccessDenied"},
		{"PUT at the bare organization id", "PUT", "/" + org, []byte("tar"), 403, "AccessDenied"},
		{"GET under another organization", "GET", "/other-org/abc/context.tar", nil, 403, "AccessDenied"},
		{"list without a prefix", "GET", "?list-type=2", nil, 403, "AccessDenied"},
		{"list with another organization's prefix", "GET", "?list-type=2&prefix=other-org%2F", nil, 403, "AccessDenied"},
		{"list with a prefix that only starts like the organization's", "GET", "?list-type=2&prefix=" + org + "x", nil, 403, "AccessDenied"},
		{"list with the bare organization id", "GET", "?list-type=2&prefix=" + org, nil, 200, ""},
		{"list with a prefix under the organization", "GET", "?list-type=2&prefix=" + org + "%2Fabc%2F", nil, 200, ""},
		{"HeadBucket", "HEAD", "", nil, 403, ""},
		{"another bucket", "PUT", "-other" + key, []byte("tar"), 404, "NoSuchBucket"},
	}
	for _, tc := range cases {
		got := s3Raw(t, a, tc.method, tc.target, tc.body, nil)
		if got.status != tc.status || got.code != tc.code {
			t.Errorf("%s: %d %q, want %d %q\n%s", tc.name, got.status, got.code, tc.status, tc.code, got.body)
		}
	}
	if got := s3Raw(t, a, "GET", "?list-type=2&prefix="+org, nil, nil); !strings.Contains(got.body, "<Key>"+org+"/abc/context.tar</Key>") {
		t.Errorf("the listing does not hold the stored key:\n%s", got.body)
	}
}

// TestObjectStorageChecksSignatures: the emulator recomputes each request's SigV4
// signature and refuses as S3 does what does not verify.
func TestObjectStorageChecksSignatures(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	a := pushAccess(t, c)
	key := "/" + a.OrganizationID + "/abc/context.tar"
	with := func(f func(*daytona.PushAccess)) *daytona.PushAccess {
		b := *a
		f(&b)
		return &b
	}
	cases := []struct {
		name   string
		access *daytona.PushAccess
		tamper func(*http.Request)
		status int
		code   string
	}{
		{"signed as issued", a, nil, 200, ""},
		{"a wrong secret", with(func(b *daytona.PushAccess) { b.Secret += "x" }), nil, 403, "SignatureDoesNotMatch"},
		{"a signature changed", a, func(r *http.Request) {
			h := r.Header.Get("Authorization")
			last := "0"
			if strings.HasSuffix(h, "0") {
				last = "1"
			}
			r.Header.Set("Authorization", h[:len(h)-1]+last)
		}, 403, "SignatureDoesNotMatch"},
		{"the key changed after signing", a, func(r *http.Request) { r.URL.Path = strings.Replace(r.URL.Path, "abc", "abd", 1) }, 403, "SignatureDoesNotMatch"},
		{"an unknown access key", with(func(b *daytona.PushAccess) { b.AccessKey = "AKIAUNKNOWN" }), nil, 403, "InvalidAccessKeyId"},
		{"no session token", with(func(b *daytona.PushAccess) { b.SessionToken = "" }), nil, 403, "InvalidAccessKeyId"},
		{"another session token", with(func(b *daytona.PushAccess) { b.SessionToken += "x" }), nil, 400, "InvalidToken"},
		{"another region", with(func(b *daytona.PushAccess) { b.Region = "eu-central-1" }), nil, 400, "AuthorizationHeaderMalformed"},
		{"an x-amz header added after signing", a, func(r *http.Request) { r.Header.Set("X-Amz-Meta-Extra", "1") }, 403, "AccessDenied"},
		{"a date an hour off", a, func(r *http.Request) {
			// Re-signed for a time an hour ago: a valid signature, a stale request.
			daytona.SignS3(r, a, []byte("tar"), time.Now().UTC().Add(-time.Hour))
		}, 403, "RequestTimeTooSkewed"},
		{"no signature", a, func(r *http.Request) { r.Header.Del("Authorization") }, 403, "AccessDenied"},
	}
	for _, tc := range cases {
		got := s3Raw(t, tc.access, "PUT", key, []byte("tar"), tc.tamper)
		if got.status != tc.status || got.code != tc.code {
			t.Errorf("%s: %d %q, want %d %q\n%s", tc.name, got.status, got.code, tc.status, tc.code, got.body)
		}
	}
	// The body is part of what is signed (its SHA-256 in X-Amz-Content-Sha256).
	req, _ := http.NewRequest("PUT", a.StorageURL+"/"+a.Bucket+key, bytes.NewReader([]byte("tar")))
	daytona.SignS3(req, a, []byte("tar"), time.Now().UTC())
	req.Body, req.ContentLength = io.NopCloser(strings.NewReader("tax")), 3
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a body changed after signing: %s, want 400 XAmzContentSHA256Mismatch", resp.Status)
	}
	if got := s3Raw(t, with(func(b *daytona.PushAccess) { b.Region = "eu-central-1" }), "GET", "?list-type=2&prefix="+a.OrganizationID, nil, nil); got.region != daytonatest.DefaultStorageRegion {
		t.Errorf("AuthorizationHeaderMalformed names region %q, want the bucket's %q", got.region, daytonatest.DefaultStorageRegion)
	}
}

// TestS3SignerMatchesAWSExample: the client signs AWS's worked "GET Bucket (List
// Objects)" example (Amazon S3 API Reference, "Signature Calculations for the
// Authorization Header") to AWS's signature.
func TestS3SignerMatchesAWSExample(t *testing.T) {
	t.Parallel()
	req, err := http.NewRequest("GET", "https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &daytona.PushAccess{AccessKey: "AKIAIOSFODNN7EXAMPLE", Secret: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", Region: "us-east-1"}
	daytona.SignS3(req, a, nil, time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC))
	const want = "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, " +
		"SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
	if got := req.Header.Get("Authorization"); got != want {
		t.Fatalf("Authorization\n got %s\nwant %s", got, want)
	}
}

// TestContextExistenceIsAListing: before uploading a build context the builder asks
// whether it is stored with a ListObjectsV2 under the organization's prefix, as the SDK
// does, never a HEAD (which the push-access credentials get 403 for on a missing key):
// a new context is listed and uploaded, the same context again only listed.
func TestContextExistenceIsAListing(t *testing.T) {
	t.Parallel()
	srv, _, ctx, b := setupBuilder(t)
	dir, hash := writeContext(t, map[string]string{"app.txt": "v1\n"})
	for i, df := range []string{"FROM platform\nCOPY app.txt /workspace/app.txt\n", "FROM platform\nCOPY . /workspace/src\n"} {
		req := specReq(sandbox.SnapshotSpec{Dockerfile: df, ContextHash: hash}, dir)
		if err := b.StartBuild(ctx, req); err != nil {
			t.Fatalf("build %d: %v", i+1, err)
		}
		if st := waitBuild(t, ctx, b, req.ID); st.Status != sandbox.StatusReady {
			t.Fatalf("build %d: %+v", i+1, st)
		}
		lists, puts, heads := srv.Count(daytonatest.StorageListRoute), srv.ContextUploads(), srv.Count(daytonatest.StorageHeadRoute)
		if lists != i+1 || puts != 1 || heads != 0 {
			t.Fatalf("after build %d: %d listings, %d PUTs, %d HEADs; want %d, 1, 0", i+1, lists, puts, heads, i+1)
		}
	}
}

// TestObjectKeysInSigV4Encoding: a key with characters url.PathEscape keeps but S3
// encodes ('+', '=', '@', '$', ':', '&', a space) is stored and then found, so its path
// and its listing's query are signed as S3 computes them.
func TestObjectKeysInSigV4Encoding(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	ctx := testCtx(t)
	a := pushAccess(t, c)
	key := a.OrganizationID + "/a+b=c@d$e:f&g h/context.tar"
	if err := daytona.PutObject(c, ctx, a, key, []byte("tar")); err != nil {
		t.Fatal(err)
	}
	ok, err := daytona.ObjectExists(c, ctx, a, key)
	if err != nil || !ok {
		t.Fatalf("ObjectExists after the PUT: %v, %v", ok, err)
	}
	if ok, err := daytona.ObjectExists(c, ctx, a, key+".other"); err != nil || ok {
		t.Fatalf("ObjectExists of a key never stored: %v, %v", ok, err)
	}
}

// TestObjectStorageErrorsSayWhatToDo: an S3 refusal comes back as a *daytona.S3Error
// with S3's code and message and what to do about it, and the provider's diagnostics see
// it as a backend's answer (sandbox.APIError).
func TestObjectStorageErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	ctx := testCtx(t)
	a := pushAccess(t, c)
	cases := []struct {
		name   string
		access func(b *daytona.PushAccess)
		key    string
		code   string
		hint   string
	}{
		{"outside the organization", nil, "other-org/abc/context.tar", "AccessDenied", "only under " + a.OrganizationID + "/"},
		{"a wrong secret", func(b *daytona.PushAccess) { b.Secret += "x" }, a.OrganizationID + "/abc/context.tar", "SignatureDoesNotMatch", "a proxy rewriting"},
		{"a stale session token", func(b *daytona.PushAccess) { b.SessionToken += "x" }, a.OrganizationID + "/abc/context.tar", "InvalidToken", "apply again"},
	}
	for _, tc := range cases {
		b := *a
		if tc.access != nil {
			tc.access(&b)
		}
		err := daytona.PutObject(c, ctx, &b, tc.key, []byte("tar"))
		var s3e *daytona.S3Error
		var api sandbox.APIError
		if !errors.As(err, &s3e) || s3e.Code != tc.code || !strings.Contains(err.Error(), tc.hint) || !errors.As(err, &api) {
			t.Errorf("%s: %v; want an S3Error %s saying %q", tc.name, err, tc.code, tc.hint)
		}
	}
}

// buildContext builds a Dockerfile snapshot with a new build context of files and
// returns the build's error (StartBuild's, or the build's failure) and the hash.
func buildContext(t *testing.T, b *daytona.Builder, files map[string]string) (string, error) {
	t.Helper()
	ctx := testCtx(t)
	dir, hash := writeContext(t, files)
	req := specReq(sandbox.SnapshotSpec{Dockerfile: "FROM platform\nCOPY . /workspace/src\n", ContextHash: hash}, dir)
	if err := b.StartBuild(ctx, req); err != nil {
		return hash, err
	}
	if st := waitBuild(t, ctx, b, req.ID); st.Status != sandbox.StatusReady {
		t.Fatalf("build: %+v", st)
	}
	return hash, nil
}

// TestContextUploadRetriedOnce: a context PUT that fails with a 5xx or loses its
// connection is sent once more, whole; a second failure is the build's error (L11).
func TestContextUploadRetriedOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		inject func(*daytonatest.Server)
	}{
		{"a 503 SlowDown", func(s *daytonatest.Server) {
			s.InjectFaults(daytonatest.StoragePutRoute, 1, http.StatusServiceUnavailable)
		}},
		{"a 500 InternalError", func(s *daytonatest.Server) {
			s.InjectFaults(daytonatest.StoragePutRoute, 1, http.StatusInternalServerError)
		}},
		{"a dropped connection", func(s *daytonatest.Server) { s.InjectStorageDrops(daytonatest.StoragePutRoute, 1) }},
	} {
		srv, c := setup(t)
		tc.inject(srv)
		hash, err := buildContext(t, daytona.NewBuilder(c), map[string]string{"app.txt": tc.name})
		if err != nil || srv.ContextUploads() != 2 || !srv.HasContext(hash) {
			t.Errorf("%s: %v after %d PUTs (stored: %v); want success after 2", tc.name, err, srv.ContextUploads(), srv.HasContext(hash))
		}
	}
	srv, c := setup(t)
	srv.InjectFaults(daytonatest.StoragePutRoute, 2, http.StatusServiceUnavailable)
	_, err := buildContext(t, daytona.NewBuilder(c), map[string]string{"app.txt": "twice"})
	var s3e *daytona.S3Error
	if !errors.As(err, &s3e) || s3e.Code != "SlowDown" || srv.ContextUploads() != 2 {
		t.Errorf("two 503s: %v after %d PUTs; want SlowDown after 2", err, srv.ContextUploads())
	}
}

// TestContextUploadDeadlineSizedToBody: a context PUT's deadline grows with its size
// (request timeout + size at 128 KiB/s), so a slow uplink finishes an upload that a
// flat request timeout would cut (L11). Here the request timeout is 400 ms and the
// 256 KiB context takes 1 s at 256 KiB/s: its deadline is 2.4 s.
func TestContextUploadDeadlineSizedToBody(t *testing.T) {
	t.Parallel()
	srv := daytonatest.NewServer(t, daytonatest.WithStorageBandwidth(256<<10))
	c := daytona.New(srv.URL(), daytonatest.DefaultKey, daytona.WithRetryPolicy(fastRetry),
		daytona.WithPollInterval(5*time.Millisecond), daytona.WithRequestTimeout(400*time.Millisecond))
	hash, err := buildContext(t, daytona.NewBuilder(c), map[string]string{"big.bin": strings.Repeat("x", 256<<10)})
	if err != nil || !srv.HasContext(hash) || srv.ContextUploads() != 1 {
		t.Fatalf("a 1 s upload with a 400 ms request timeout: %v after %d PUTs", err, srv.ContextUploads())
	}
}

// TestContextUploadSignsForTheBucketsRegion: the client signs for the region push-access
// reports (v0.205 StorageAccessDto.region), which the emulator's S3 insists on; with no
// region reported (v0.190) it assumes us-east-1, and when the bucket is elsewhere it
// signs again, once, for the region S3's AuthorizationHeaderMalformed names (L15).
func TestContextUploadSignsForTheBucketsRegion(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		opts          []daytonatest.Option
		reported      string
		lists, lists2 int // listings for the first build, in all after a second
	}{
		{"reported us-east-1", nil, "us-east-1", 1, 2},
		{"reported eu-central-1", []daytonatest.Option{daytonatest.WithStorageRegion("eu-central-1")}, "eu-central-1", 1, 2},
		{"none reported, bucket in us-east-1", []daytonatest.Option{daytonatest.WithoutPushAccessRegion()}, "us-east-1", 1, 2},
		// One listing refused for us-east-1, then signed for eu-central-1, and so the PUT;
		// the next build starts from us-east-1 again (push access is asked each time).
		{"none reported, bucket in eu-central-1", []daytonatest.Option{daytonatest.WithStorageRegion("eu-central-1"),
			daytonatest.WithoutPushAccessRegion()}, "us-east-1", 2, 4},
	}
	for _, tc := range cases {
		srv, c := setup(t, tc.opts...)
		if a := pushAccess(t, c); a.Region != tc.reported {
			t.Errorf("%s: push access region %q, want %q", tc.name, a.Region, tc.reported)
		}
		b := daytona.NewBuilder(c)
		files := map[string]string{"app.txt": tc.name}
		hash, err := buildContext(t, b, files)
		if err != nil || !srv.HasContext(hash) || srv.ContextUploads() != 1 || srv.Count(daytonatest.StorageListRoute) != tc.lists {
			t.Errorf("%s: %v after %d PUTs and %d listings; want success after 1 and %d", tc.name, err,
				srv.ContextUploads(), srv.Count(daytonatest.StorageListRoute), tc.lists)
			continue
		}
		dir, _ := writeContext(t, files)
		req := specReq(sandbox.SnapshotSpec{Dockerfile: "FROM platform\nCOPY app.txt /workspace/app.txt\n", ContextHash: hash}, dir)
		if err := b.StartBuild(testCtx(t), req); err != nil || srv.ContextUploads() != 1 || srv.Count(daytonatest.StorageListRoute) != tc.lists2 {
			t.Errorf("%s: the same context again: %v after %d PUTs and %d listings; want 1 and %d", tc.name, err,
				srv.ContextUploads(), srv.Count(daytonatest.StorageListRoute), tc.lists2)
		}
	}
}
