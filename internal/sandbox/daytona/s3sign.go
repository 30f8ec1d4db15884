package daytona

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// signV4 adds the headers of an AWS SigV4 signature for service s3 to req (the SDKs use
// the AWS S3 client with the push-access credentials; this module has no AWS SDK, and a
// PUT and a listing need only the signature). req's path and query must already be in
// SigV4's canonical form (s3URL builds them so): they are signed as sent.
func signV4(req *http.Request, a *PushAccess, body []byte, now time.Time) {
	payload := sha256.Sum256(body)
	payloadHex := hex.EncodeToString(payload[:])
	amzDate := now.Format("20060102T150405Z")
	day := now.Format("20060102")
	req.Header.Set("X-Amz-Date", amzDate)
	req.Header.Set("X-Amz-Content-Sha256", payloadHex)
	if a.SessionToken != "" {
		req.Header.Set("X-Amz-Security-Token", a.SessionToken)
	}
	names := []string{"host"}
	for k := range req.Header {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-amz-") || lk == "content-type" {
			names = append(names, lk)
		}
	}
	sort.Strings(names)
	var canonHeaders strings.Builder
	for _, n := range names {
		v := req.URL.Host
		if n != "host" {
			v = strings.TrimSpace(req.Header.Get(n))
		}
		canonHeaders.WriteString(n + ":" + v + "\n")
	}
	signed := strings.Join(names, ";")
	canonical := strings.Join([]string{req.Method, req.URL.EscapedPath(), req.URL.RawQuery,
		canonHeaders.String(), signed, payloadHex}, "\n")
	scope := day + "/" + a.Region + "/s3/aws4_request"
	ch := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(ch[:])
	k := hmacSHA256([]byte("AWS4"+a.Secret), day)
	k = hmacSHA256(k, a.Region)
	k = hmacSHA256(k, "s3")
	k = hmacSHA256(k, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(k, toSign))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+a.AccessKey+"/"+scope+
		", SignedHeaders="+signed+", Signature="+sig)
}

func hmacSHA256(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// uriEncode is SigV4's UriEncode: every byte but the unreserved A-Z, a-z, 0-9, '-', '.',
// '_' and '~' as %XX in upper-case hex. url.PathEscape keeps '$', '&', '+', ':', '=',
// '@' and more, which S3 encodes when it computes the canonical request, so a key with
// one would not verify.
func uriEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
			b.WriteByte(c)
		default:
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	return b.String()
}

// canonicalQuery is q in SigV4's canonical form, which is also a valid query string:
// names and values uriEncoded, sorted by name and then value.
func canonicalQuery(q url.Values) string {
	names := make([]string, 0, len(q))
	for n := range q {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return uriEncode(names[i]) < uriEncode(names[j]) })
	var parts []string
	for _, n := range names {
		vals := make([]string, len(q[n]))
		for i, v := range q[n] {
			vals[i] = uriEncode(v)
		}
		sort.Strings(vals)
		for _, v := range vals {
			parts = append(parts, uriEncode(n)+"="+v)
		}
	}
	return strings.Join(parts, "&")
}
