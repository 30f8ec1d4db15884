package daytonatest

import (
	"io"
	"net/http"
	"strings"
)

// The emulator's object storage: GET /object-storage/push-access hands out fixed
// credentials (StorageAccessDto) for a path-style S3 endpoint under {server}/storage on
// loopback, which answers PUT, HEAD and GET of objects under the organization's prefix
// and refuses requests not signed (AWS SigV4) with those credentials or outside the
// prefix, as the credentials of v0.190 apps/api/src/object-storage/services/
// object-storage.service.ts allow s3:PutObject and s3:GetObject on
// {bucket}/{organizationId}/* only. Signatures are checked for the access key and session
// token, not recomputed.
const (
	storageBucket       = "daytona-volume-builds"
	storageAccessKey    = "daytonatest-access"
	storageSecret       = "daytonatest-secret"
	storageSessionToken = "daytonatest-session"
	// OrganizationID is the emulated organization's id (SnapshotDto.organizationId).
	OrganizationID = "org-test"
)

// contextKey is where the runner reads a build context (apps/runner/pkg/storage/
// minio_client.go GetObject).
func contextKey(hash string) string { return OrganizationID + "/" + hash + "/context.tar" }

// objectStorageRoutes adds the push-access endpoint and the S3 endpoint to mux.
func (s *Server) objectStorageRoutes(mux *http.ServeMux) {
	s.handle(mux, "/api", "GET /object-storage/push-access", "", s.pushAccess)
	for _, m := range []string{http.MethodPut, http.MethodHead, http.MethodGet} {
		route := m + " /storage/{bucket}/{key...}"
		mux.HandleFunc(route, func(w http.ResponseWriter, r *http.Request) { s.object(w, r, route) })
	}
}

func (s *Server) pushAccess(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{
		"accessKey": storageAccessKey, "secret": storageSecret, "sessionToken": storageSessionToken,
		"storageUrl": s.ts.URL + "/storage", "organizationId": OrganizationID, "bucket": storageBucket,
		"region": "us-east-1",
	})
}

// ContextUploads returns how many context tarballs were uploaded (PUTs that stored one).
func (s *Server) ContextUploads() int {
	return s.Count("PUT /storage/{bucket}/{key...}")
}

// HasContext reports whether the context tarball of hash was uploaded.
func (s *Server) HasContext(hash string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.bis().objects[contextKey(hash)]
	return ok
}

func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>"+code+"</Code></Error>")
}

func (s *Server) object(w http.ResponseWriter, r *http.Request, route string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[route]++
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+storageAccessKey+"/") ||
		!strings.Contains(auth, "Signature=") || r.Header.Get("X-Amz-Security-Token") != storageSessionToken ||
		r.Header.Get("X-Amz-Date") == "" || r.Header.Get("X-Amz-Content-Sha256") == "" {
		s3Error(w, http.StatusForbidden, "AccessDenied")
		return
	}
	key := r.PathValue("key")
	if r.PathValue("bucket") != storageBucket || !strings.HasPrefix(key, OrganizationID+"/") {
		s3Error(w, http.StatusForbidden, "AccessDenied")
		return
	}
	objs := s.bis().objects
	switch r.Method {
	case http.MethodPut:
		b, err := io.ReadAll(r.Body)
		if err != nil {
			s3Error(w, http.StatusBadRequest, "IncompleteBody")
			return
		}
		objs[key] = b
		w.WriteHeader(http.StatusOK)
	default:
		b, ok := objs[key]
		if !ok {
			if r.Method == http.MethodHead {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			s3Error(w, http.StatusNotFound, "NoSuchKey")
			return
		}
		w.Header().Set("Content-Type", "application/x-tar")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(b)
		}
	}
}
