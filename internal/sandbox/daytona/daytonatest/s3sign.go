package daytonatest

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The emulator's check of AWS Signature Version 4 (header form, service s3), written
// from AWS's description of the algorithm ("Create a signed AWS API request": canonical
// request, string to sign, derived signing key) rather than shared with the client's
// signer, so that a mistake in either shows. It answers what Amazon S3 answers: the
// error code, its HTTP status and its message (AWS S3 API Reference "Error responses");
// checks in the order S3 reports them: the credential scope, the access key, the
// region, the session token, unsigned x-amz headers, the signature, the payload hash.

// s3Err is one S3 error answer.
type s3Err struct {
	status        int
	code, message string
	// region is S3's <Region> element of an AuthorizationHeaderMalformed for a wrong
	// region: the bucket's.
	region string
	// canonical and toSign are S3's <CanonicalRequest> and <StringToSign> of a
	// SignatureDoesNotMatch: what S3 computed, for the caller to compare.
	canonical, toSign string
}

// sigV4 is a parsed Authorization header.
type sigV4 struct {
	accessKey, day, region, service string
	signed                          []string
	signature                       string
}

const sigV4Algorithm = "AWS4-HMAC-SHA256"

// maxClockSkew is how far X-Amz-Date may be from S3's clock (RequestTimeTooSkewed).
const maxClockSkew = 15 * time.Minute

func malformed(msg string) *s3Err {
	return &s3Err{status: http.StatusBadRequest, code: "AuthorizationHeaderMalformed",
		message: "The authorization header is malformed; " + msg}
}

// parseSigV4 parses "AWS4-HMAC-SHA256 Credential=AK/day/region/service/aws4_request,
// SignedHeaders=a;b, Signature=hex".
func parseSigV4(h string) (sigV4, *s3Err) {
	var v sigV4
	rest, ok := strings.CutPrefix(h, sigV4Algorithm+" ")
	if !ok {
		return v, &s3Err{status: http.StatusBadRequest, code: "InvalidRequest",
			message: "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256."}
	}
	fields := map[string]string{}
	for _, part := range strings.Split(rest, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return v, malformed("the authorization component \"" + part + "\" is malformed.")
		}
		fields[k] = val
	}
	cred, signed, sig := fields["Credential"], fields["SignedHeaders"], fields["Signature"]
	if cred == "" || signed == "" || sig == "" {
		return v, malformed("the authorization header requires Credential, SignedHeaders and Signature.")
	}
	scope := strings.Split(cred, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" || scope[2] == "" {
		return v, malformed("the Credential is mal-formed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".")
	}
	v = sigV4{accessKey: scope[0], day: scope[1], region: scope[2], service: scope[3],
		signed: strings.Split(signed, ";"), signature: sig}
	return v, nil
}

// verifySigV4 checks r's signature against the credentials the emulator handed out
// (storageCreds) for a bucket in region; payload is the body as received.
func verifySigV4(r *http.Request, creds storageCreds, region string, payload []byte, now time.Time) *s3Err {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		// Anonymous: the bucket is not public.
		return &s3Err{status: http.StatusForbidden, code: "AccessDenied", message: "Access Denied"}
	}
	v, err := parseSigV4(auth)
	if err != nil {
		return err
	}
	if v.accessKey != creds.accessKey {
		return &s3Err{status: http.StatusForbidden, code: "InvalidAccessKeyId",
			message: "The AWS Access Key Id you provided does not exist in our records."}
	}
	if v.region != region {
		e := malformed("the region '" + v.region + "' is wrong; expecting '" + region + "'")
		e.region = region
		return e
	}
	if v.service != "s3" {
		return malformed("incorrect service '" + v.service + "'. This endpoint belongs to 's3'.")
	}
	amzDate := r.Header.Get("X-Amz-Date")
	t, perr := time.Parse("20060102T150405Z", amzDate)
	if perr != nil {
		return &s3Err{status: http.StatusForbidden, code: "AccessDenied",
			message: "AWS authentication requires a valid Date or x-amz-date header"}
	}
	if v.day != amzDate[:8] {
		return malformed("Invalid credential date \"" + v.day + "\". This date is not the same as X-Amz-Date: \"" + amzDate[:8] + "\".")
	}
	if d := now.Sub(t); d > maxClockSkew || d < -maxClockSkew {
		return &s3Err{status: http.StatusForbidden, code: "RequestTimeTooSkewed",
			message: "The difference between the request time and the current time is too large."}
	}
	// Temporary (STS) credentials are only valid with their session token.
	switch tok := r.Header.Get("X-Amz-Security-Token"); {
	case tok == "":
		return &s3Err{status: http.StatusForbidden, code: "InvalidAccessKeyId",
			message: "The AWS Access Key Id you provided does not exist in our records."}
	case tok != creds.sessionToken:
		return &s3Err{status: http.StatusBadRequest, code: "InvalidToken",
			message: "The provided token is malformed or otherwise invalid."}
	}
	contentHash := r.Header.Get("X-Amz-Content-Sha256")
	if contentHash == "" {
		return &s3Err{status: http.StatusBadRequest, code: "InvalidRequest",
			message: "Missing required header for this request: x-amz-content-sha256"}
	}
	// Host and every x-amz-* header must be signed.
	mustSign := []string{"host"}
	for name := range r.Header {
		if n := strings.ToLower(name); strings.HasPrefix(n, "x-amz-") {
			mustSign = append(mustSign, n)
		}
	}
	for _, n := range mustSign {
		if !slices.Contains(v.signed, n) {
			return &s3Err{status: http.StatusForbidden, code: "AccessDenied",
				message: "There were headers present in the request which were not signed: " + n}
		}
	}
	canonical := canonicalRequest(r, v.signed, contentHash)
	want, toSign := sigV4Signature(creds.secret, v.day, v.region, amzDate, canonical)
	if !hmac.Equal([]byte(want), []byte(v.signature)) {
		return &s3Err{status: http.StatusForbidden, code: "SignatureDoesNotMatch",
			message:   "The request signature we calculated does not match the signature you provided. Check your key and signing method.",
			canonical: canonical, toSign: toSign}
	}
	if contentHash != "UNSIGNED-PAYLOAD" {
		got := sha256.Sum256(payload)
		if contentHash != hex.EncodeToString(got[:]) {
			return &s3Err{status: http.StatusBadRequest, code: "XAmzContentSHA256Mismatch",
				message: "The provided 'x-amz-content-sha256' header does not match what was computed."}
		}
	}
	return nil
}

// sigV4Signature is the signature of canonical made at amzDate with secret for service s3
// in region (day is amzDate's), and the string to sign it signs.
func sigV4Signature(secret, day, region, amzDate, canonical string) (sig, toSign string) {
	sum := sha256.Sum256([]byte(canonical))
	toSign = sigV4Algorithm + "\n" + amzDate + "\n" + day + "/" + region + "/s3/aws4_request\n" + hex.EncodeToString(sum[:])
	key := []byte("AWS4" + secret)
	for _, part := range []string{day, region, "s3", "aws4_request"} {
		key = hmacSum(key, part)
	}
	return hex.EncodeToString(hmacSum(key, toSign)), toSign
}

// canonicalRequest is SigV4's canonical request of r as S3 computes it: the path
// URI-encoded once (S3 neither normalizes it nor encodes it twice), the query sorted by
// encoded name and value, each signed header "name:value" with values trimmed and inner
// runs of spaces collapsed, the signed header names and the payload hash.
func canonicalRequest(r *http.Request, signed []string, payloadHash string) string {
	var b strings.Builder
	b.WriteString(r.Method + "\n")
	segs := strings.Split(r.URL.EscapedPath(), "/")
	for i, s := range segs {
		if u, err := url.PathUnescape(s); err == nil {
			s = u
		}
		segs[i] = awsURIEncode(s)
	}
	b.WriteString(strings.Join(segs, "/") + "\n")
	var pairs [][2]string
	for _, p := range strings.Split(r.URL.RawQuery, "&") {
		if p == "" {
			continue
		}
		k, v, _ := strings.Cut(p, "=")
		k, _ = url.QueryUnescape(k)
		v, _ = url.QueryUnescape(v)
		pairs = append(pairs, [2]string{awsURIEncode(k), awsURIEncode(v)})
	}
	// By encoded name, then value (not as "name=value" strings: '-' and digits sort below '=').
	slices.SortFunc(pairs, func(a, b [2]string) int {
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
	})
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p[0] + "=" + p[1])
	}
	b.WriteString("\n")
	for _, name := range signed {
		var val string
		switch name {
		case "host":
			val = r.Host
		case "content-length":
			val = strconv.FormatInt(r.ContentLength, 10)
		default:
			val = strings.Join(r.Header.Values(name), ",")
		}
		b.WriteString(name + ":" + strings.Join(strings.Fields(val), " ") + "\n")
	}
	b.WriteString("\n" + strings.Join(signed, ";") + "\n" + payloadHash)
	return b.String()
}

// awsURIEncode is SigV4's UriEncode: every byte but A-Z, a-z, 0-9, '-', '.', '_' and '~'
// as %XX with upper-case hex (the slash too: callers encode path segments).
func awsURIEncode(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

func hmacSum(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}
