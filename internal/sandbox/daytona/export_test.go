package daytona

import (
	"net/http"
	"time"
)

// Test access to the object storage client (objectstorage.go, s3sign.go).
var (
	// PutObject uploads a body under a key, as a build context is uploaded.
	PutObject = (*Client).putObject
	// ObjectExists is the existence check before an upload.
	ObjectExists = (*Client).objectExists
)

// SignS3 signs req with a's credentials at now, as every object storage request is.
func SignS3(req *http.Request, a *PushAccess, body []byte, now time.Time) {
	signV4(req, a, body, now)
}
