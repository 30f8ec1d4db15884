package daytonatest

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// listResult is ListObjectsV2's answer (AWS S3 API Reference, ListObjectsV2: Response
// Syntax), without CommonPrefixes: the emulator refuses a delimiter.
type listResult struct {
	XMLName               xml.Name      `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListBucketResult"`
	Name                  string        `xml:"Name"`
	Prefix                string        `xml:"Prefix"`
	StartAfter            string        `xml:"StartAfter,omitempty"`
	ContinuationToken     string        `xml:"ContinuationToken,omitempty"`
	NextContinuationToken string        `xml:"NextContinuationToken,omitempty"`
	KeyCount              int           `xml:"KeyCount"`
	MaxKeys               int           `xml:"MaxKeys"`
	IsTruncated           bool          `xml:"IsTruncated"`
	Contents              []listContent `xml:"Contents"`
}

type listContent struct {
	Key          string `xml:"Key"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int    `xml:"Size"`
	StorageClass string `xml:"StorageClass"`
}

// etag is S3's ETag of an object stored by one PUT: its MD5, quoted.
func etag(b []byte) string {
	sum := md5.Sum(b)
	return "\"" + hex.EncodeToString(sum[:]) + "\""
}

// listObjectsV2 answers GET /{bucket}?list-type=2 (called with mu held, after the
// signature check): the keys with the prefix, in UTF-8 byte order, after start-after
// or the continuation token, at most max-keys (default and cap 1000) of them. The
// push-access policy allows it only with a prefix under the organization's
// (s3policy.go); the SDK's existence check is such a listing (clients v0.205
// sdk-go/pkg/daytona/object_storage.go:196-207).
func (s *Server) listObjectsV2(w http.ResponseWriter, r *http.Request, bucket string) {
	q := r.URL.Query()
	prefix, hasPrefix := q.Get("prefix"), q.Has("prefix")
	if !allows(s.storagePolicy(), "s3:ListBucket", "arn:aws:s3:::"+bucket, prefix, hasPrefix) {
		writeS3Error(w, r, accessDenied("s3:ListBucket", "arn:aws:s3:::"+bucket))
		return
	}
	for _, p := range []string{"delimiter", "encoding-type"} {
		if q.Has(p) {
			writeS3Error(w, r, &s3Err{status: http.StatusNotImplemented, code: "NotImplemented",
				message: "The emulator does not implement the ListObjectsV2 parameter " + p + "."})
			return
		}
	}
	maxKeys := 1000
	if v := q.Get("max-keys"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeS3Error(w, r, &s3Err{status: http.StatusBadRequest, code: "InvalidArgument",
				message: "Provided max-keys not an integer or within integer range"})
			return
		}
		maxKeys = min(n, 1000)
	}
	after := q.Get("start-after")
	token := q.Get("continuation-token")
	if token != "" {
		k, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil {
			writeS3Error(w, r, &s3Err{status: http.StatusBadRequest, code: "InvalidArgument",
				message: "The continuation token provided is incorrect"})
			return
		}
		after = max(after, string(k))
	}
	objs := s.bis().objects
	var keys []string
	for k := range objs {
		if strings.HasPrefix(k, prefix) && k > after {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	res := listResult{Name: bucket, Prefix: prefix, StartAfter: q.Get("start-after"),
		ContinuationToken: token, MaxKeys: maxKeys}
	if len(keys) > maxKeys {
		keys, res.IsTruncated = keys[:maxKeys], true
		if maxKeys > 0 {
			res.NextContinuationToken = base64.RawURLEncoding.EncodeToString([]byte(keys[maxKeys-1]))
		}
	}
	for _, k := range keys {
		res.Contents = append(res.Contents, listContent{Key: k, ETag: etag(objs[k]), Size: len(objs[k]),
			LastModified: s.st.modified[k].UTC().Format("2006-01-02T15:04:05.000Z"), StorageClass: "STANDARD"})
	}
	res.KeyCount = len(res.Contents)
	body, _ := xml.Marshal(res)
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(body)
}

// storedAt records when key was stored (ListObjectsV2's LastModified).
func (st *storageState) storedAt(key string, t time.Time) {
	if st.modified == nil {
		st.modified = map[string]time.Time{}
	}
	st.modified[key] = t
}
