package daytona

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
)

// S3Error is a refusal or failure of the object storage the build contexts go to: S3's
// XML error document (<Error><Code>…</Code><Message>…</Message></Error>), or only a
// status when the answer is not one (a HEAD, or a proxy in front of the storage).
type S3Error struct {
	Op      string // e.g. "PUT org/hash/context.tar"
	Status  int
	Code    string // S3's error code, e.g. "AccessDenied"
	Message string
	// Region is the bucket's region that an AuthorizationHeaderMalformed names.
	Region string
	// signedFor is the region the request was signed for; org the organization's prefix.
	signedFor, org string
}

// Backend names the service that answered (sandbox.APIError).
func (e *S3Error) Backend() string { return "Daytona object storage" }

func (e *S3Error) Error() string {
	what := e.Code
	if what == "" {
		what = http.StatusText(e.Status)
	}
	s := fmt.Sprintf("daytona: object storage %s: %d %s", e.Op, e.Status, what)
	if e.Message != "" {
		s += ": " + strings.TrimSuffix(e.Message, ".") // the hint follows after ". "
	}
	if h := e.hint(); h != "" {
		s += ". " + h
	}
	return s
}

// hint says what the error means for a build context upload and what to do.
func (e *S3Error) hint() string {
	switch e.Code {
	case "AccessDenied":
		return "The push-access credentials Daytona handed out may put and get objects only under " + e.org +
			"/ and list only prefixes under it; if this request is within that, the Daytona server's S3 role or bucket policy " +
			"denies what its own session policy grants: ask its operator to check S3_ROLE_NAME and the bucket policy"
	case "SignatureDoesNotMatch":
		return "The storage computed another AWS SigV4 signature for this request; something between this machine " +
			"and the bucket (a proxy rewriting the host or path) probably changed it: reach the storage URL directly"
	case "InvalidAccessKeyId", "InvalidToken", "ExpiredToken":
		return "The storage refused the temporary credentials of GET /object-storage/push-access (they last an hour); " +
			"run terraform apply again, and if it persists the Daytona server's STS configuration is at fault"
	case "AuthorizationHeaderMalformed":
		if e.Region != "" && e.Region != e.signedFor {
			return fmt.Sprintf("The bucket is in region %s but the request was signed for %s: "+
				"Daytona servers before v0.205 report no region, and us-east-1 is then assumed", e.Region, e.signedFor)
		}
	case "RequestTimeTooSkewed":
		return "This machine's clock is more than 15 minutes off the storage's: set it right (NTP) and apply again"
	case "XAmzContentSHA256Mismatch", "BadDigest", "IncompleteBody":
		return "The body changed on its way to the storage: apply again"
	}
	if e.Status >= 500 {
		return "The storage failed: apply again later"
	}
	return ""
}

// newS3Error reads the error document of an answer with status and body.
func newS3Error(op string, status int, body []byte, a *PushAccess) *S3Error {
	e := &S3Error{Op: op, Status: status, signedFor: a.Region, org: a.OrganizationID}
	var doc struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
		Region  string `xml:"Region"`
	}
	if xml.Unmarshal(body, &doc) == nil && doc.Code != "" {
		e.Code, e.Message, e.Region = doc.Code, doc.Message, doc.Region
	} else if msg := strings.TrimSpace(string(body)); msg != "" {
		// Not S3's document: the start of whatever answered.
		e.Message = truncate(msg, 200)
	}
	return e
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
