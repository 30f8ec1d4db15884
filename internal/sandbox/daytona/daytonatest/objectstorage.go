package daytonatest

import (
	"encoding/xml"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The emulator's object storage: GET /object-storage/push-access hands out fixed
// temporary credentials (StorageAccessDto) for a path-style S3 endpoint under
// {server}/storage on loopback. That endpoint answers as Amazon S3 answers the holder of
// those credentials: every request is checked for an AWS SigV4 signature made with them
// (s3sign.go), then against the session policy v0.190 puts on them (s3policy.go:
// PutObject and GetObject under {organizationId}/, ListBucket only for prefixes under
// it). It serves PutObject, GetObject, HeadObject and ListObjectsV2 (s3list.go) and
// answers anything else 501 NotImplemented.
const (
	storageBucket       = "daytona-volume-builds"
	storageAccessKey    = "daytonatest-access"
	storageSecret       = "daytonatest-secret"
	storageSessionToken = "daytonatest-session"
	// OrganizationID is the emulated organization's id (SnapshotDto.organizationId).
	OrganizationID = "org-test"
	// DefaultStorageRegion is the bucket's region unless WithStorageRegion says otherwise.
	DefaultStorageRegion = "us-east-1"
	// maxObject caps one PUT's body (S3 allows 5 GiB; a build context is at most 64 MiB).
	maxObject = 256 << 20
)

// The object storage's routes, for Count and InjectFaults: an object's PUT, GET and HEAD,
// and the bucket's GET (ListObjectsV2) and HEAD.
const (
	StoragePutRoute  = "PUT /storage/{bucket}/{key...}"
	StorageGetRoute  = "GET /storage/{bucket}/{key...}"
	StorageHeadRoute = "HEAD /storage/{bucket}/{key...}"
	StorageListRoute = "GET /storage/{bucket}"
	storageHeadBkt   = "HEAD /storage/{bucket}"
)

// storageCreds are temporary S3 credentials: an access key, its secret and the STS
// session token they are valid with.
type storageCreds struct{ accessKey, secret, sessionToken string }

var issuedCreds = storageCreds{storageAccessKey, storageSecret, storageSessionToken}

// storageState is the object storage's state beyond the objects (buildInputState.objects).
// Guarded by Server.mu.
type storageState struct {
	modified map[string]time.Time // when each object was stored
	drops    map[string]int       // InjectStorageDrops: connections still to drop, by route
}

// WithStorageRegion puts the bucket in region: push-access reports it (v0.205
// StorageAccessDto.region, required there) and S3 refuses a signature made for another
// region with 400 AuthorizationHeaderMalformed naming the bucket's region in <Region>,
// as Amazon S3 does. Default DefaultStorageRegion.
func WithStorageRegion(region string) Option { return func(c *config) { c.storageRegion = region } }

// WithoutPushAccessRegion makes push-access answer as v0.190 does, with no region: its
// StorageAccessDto has none (apps/api/src/sandbox/dto/storage-access-dto.ts:8-44) and
// object-storage.service.ts:126-133 and :162-169 return none.
func WithoutPushAccessRegion() Option { return func(c *config) { c.noPushRegion = true } }

// WithStorageBandwidth makes an object's PUT take as long as its body takes at
// bytesPerSecond (a slow uplink) before S3 answers; a client that gives up before then
// stores nothing. Default: no delay.
func WithStorageBandwidth(bytesPerSecond int) Option {
	return func(c *config) { c.storageBandwidth = bytesPerSecond }
}

// InjectStorageDrops makes the next n requests to an object storage route lose their
// connection after their body arrived, with no answer: a transport error at the client
// (a connection reset by a proxy or a flaky link).
func (s *Server) InjectStorageDrops(route string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.drops == nil {
		s.st.drops = map[string]int{}
	}
	s.st.drops[route] += n
}

func (s *Server) storageRegion() string {
	if s.cfg.storageRegion != "" {
		return s.cfg.storageRegion
	}
	return DefaultStorageRegion
}

func (s *Server) storagePolicy() []policyStatement {
	return pushAccessPolicy(storageBucket, OrganizationID)
}

// contextKey is where the runner reads a build context (apps/runner/pkg/storage/
// minio_client.go:68-70 GetObject).
func contextKey(hash string) string { return OrganizationID + "/" + hash + "/context.tar" }

// objectStorageRoutes adds the push-access endpoint and the S3 endpoint to mux.
func (s *Server) objectStorageRoutes(mux *http.ServeMux) {
	s.handle(mux, "/api", "GET /object-storage/push-access", "", s.pushAccess)
	for _, route := range []string{StoragePutRoute, StorageGetRoute, StorageHeadRoute, StorageListRoute, storageHeadBkt} {
		mux.HandleFunc(route, func(w http.ResponseWriter, r *http.Request) { s.s3Request(w, r, route) })
	}
}

// pushAccess answers StorageAccessDto as getPushAccess does (object-storage.service.ts:
// 33-87, the fields at :126-133 and :162-169), with v0.205's region unless
// WithoutPushAccessRegion.
func (s *Server) pushAccess(w http.ResponseWriter, _ *http.Request) {
	dto := map[string]string{
		"accessKey": storageAccessKey, "secret": storageSecret, "sessionToken": storageSessionToken,
		"storageUrl": s.ts.URL + "/storage", "organizationId": OrganizationID, "bucket": storageBucket,
		"region": s.storageRegion(),
	}
	if s.cfg.noPushRegion {
		delete(dto, "region")
	}
	writeJSON(w, http.StatusOK, dto)
}

// ContextUploads returns how many PUTs of an object reached the object storage, each
// attempt counted, refused ones too.
func (s *Server) ContextUploads() int {
	return s.Count(StoragePutRoute)
}

// HasContext reports whether the context tarball of hash was uploaded.
func (s *Server) HasContext(hash string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.bis().objects[contextKey(hash)]
	return ok
}

// s3ErrorBody is S3's error document (AWS S3 API Reference, "Error responses").
type s3ErrorBody struct {
	XMLName          xml.Name `xml:"Error"`
	Code             string   `xml:"Code"`
	Message          string   `xml:"Message"`
	Region           string   `xml:"Region,omitempty"`
	CanonicalRequest string   `xml:"CanonicalRequest,omitempty"`
	StringToSign     string   `xml:"StringToSign,omitempty"`
	RequestID        string   `xml:"RequestId"`
}

// writeS3Error writes e as S3 does: an XML error document, or only the status for a HEAD
// (whose answers have no body, so a HEAD's caller sees only 403 or 404).
func writeS3Error(w http.ResponseWriter, r *http.Request, e *s3Err) {
	if r.Method == http.MethodHead {
		w.WriteHeader(e.status)
		return
	}
	body, _ := xml.Marshal(s3ErrorBody{Code: e.code, Message: e.message, Region: e.region,
		CanonicalRequest: e.canonical, StringToSign: e.toSign, RequestID: newUUID()})
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(e.status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(body)
}

// faultError is S3's answer for an injected status (InjectFaults on a storage route).
func faultError(status int) *s3Err {
	switch status {
	case http.StatusInternalServerError:
		return &s3Err{status: status, code: "InternalError", message: "We encountered an internal error. Please try again."}
	case http.StatusServiceUnavailable:
		return &s3Err{status: status, code: "SlowDown", message: "Please reduce your request rate."}
	}
	return &s3Err{status: status, code: strings.ReplaceAll(http.StatusText(status), " ", ""), message: "injected fault"}
}

// s3Request serves one S3 request of route: counting and faults first (as handle does
// for the API), then the body, the signature, the bucket and the operation.
func (s *Server) s3Request(w http.ResponseWriter, r *http.Request, route string) {
	s.mu.Lock()
	s.counts[route]++
	f, faulted := s.takeFault(route)
	drop := s.st.drops[route] > 0
	if drop {
		s.st.drops[route]--
	}
	s.mu.Unlock()
	if faulted {
		writeS3Error(w, r, faultError(f.status))
		return
	}
	if r.Method == http.MethodPut && r.ContentLength < 0 {
		writeS3Error(w, r, &s3Err{status: http.StatusLengthRequired, code: "MissingContentLength",
			message: "You must provide the Content-Length HTTP header."})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxObject+1))
	switch {
	case err != nil:
		writeS3Error(w, r, &s3Err{status: http.StatusBadRequest, code: "IncompleteBody",
			message: "You did not provide the number of bytes specified by the Content-Length HTTP header."})
		return
	case len(body) > maxObject:
		writeS3Error(w, r, &s3Err{status: http.StatusBadRequest, code: "EntityTooLarge",
			message: "Your proposed upload exceeds the maximum allowed size"})
		return
	}
	if drop {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // no hijacking (HTTP/2): abort the stream instead
	}
	if bw := s.cfg.storageBandwidth; bw > 0 && len(body) > 0 {
		select {
		case <-time.After(time.Duration(len(body)) * time.Second / time.Duration(bw)):
		case <-r.Context().Done():
			return // the client gave up before its body was through: nothing stored
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := verifySigV4(r, issuedCreds, s.storageRegion(), body, time.Now()); e != nil {
		writeS3Error(w, r, e)
		return
	}
	bucket, key := r.PathValue("bucket"), r.PathValue("key")
	if bucket != storageBucket {
		writeS3Error(w, r, &s3Err{status: http.StatusNotFound, code: "NoSuchBucket", message: "The specified bucket does not exist"})
		return
	}
	bucketARN := "arn:aws:s3:::" + bucket
	switch {
	case key == "" && r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "2":
		s.listObjectsV2(w, r, bucket)
	case key == "" && r.Method == http.MethodHead:
		// HeadBucket needs s3:ListBucket, here with no s3:prefix.
		if !allows(s.storagePolicy(), "s3:ListBucket", bucketARN, "", false) {
			writeS3Error(w, r, accessDenied("s3:ListBucket", bucketARN))
			return
		}
		w.WriteHeader(http.StatusOK)
	case key == "" || r.URL.RawQuery != "":
		writeS3Error(w, r, &s3Err{status: http.StatusNotImplemented, code: "NotImplemented",
			message: "The emulator implements PutObject, GetObject, HeadObject and ListObjectsV2 (list-type=2) only."})
	case r.Method == http.MethodPut:
		s.putObject(w, r, bucketARN+"/"+key, key, body)
	default:
		s.getObject(w, r, bucketARN, key)
	}
}

func (s *Server) putObject(w http.ResponseWriter, r *http.Request, arn, key string, body []byte) {
	if !allows(s.storagePolicy(), "s3:PutObject", arn, "", false) {
		writeS3Error(w, r, accessDenied("s3:PutObject", arn))
		return
	}
	s.bis().objects[key] = body
	s.st.storedAt(key, time.Now())
	w.Header().Set("ETag", etag(body))
	w.WriteHeader(http.StatusOK)
}

// getObject answers GetObject and HeadObject. A missing key is 404 NoSuchKey only for a
// caller that may list the bucket, else 403 AccessDenied (AWS S3 API Reference,
// HeadObject and GetObject, "Permissions": "If you don't have the s3:ListBucket
// permission, Amazon S3 returns an HTTP status code 403"). The push-access credentials
// may list only with an s3:prefix (object-storage.service.ts:62-71), which a GetObject
// does not carry: for them a missing key is always 403.
func (s *Server) getObject(w http.ResponseWriter, r *http.Request, bucketARN, key string) {
	arn := bucketARN + "/" + key
	if !allows(s.storagePolicy(), "s3:GetObject", arn, "", false) {
		writeS3Error(w, r, accessDenied("s3:GetObject", arn))
		return
	}
	b, ok := s.bis().objects[key]
	if !ok {
		if !allows(s.storagePolicy(), "s3:ListBucket", bucketARN, "", false) {
			writeS3Error(w, r, accessDenied("s3:ListBucket", bucketARN))
			return
		}
		writeS3Error(w, r, &s3Err{status: http.StatusNotFound, code: "NoSuchKey", message: "The specified key does not exist."})
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("ETag", etag(b))
	w.Header().Set("Last-Modified", s.st.modified[key].UTC().Format(http.TimeFormat))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(b)
	}
}
