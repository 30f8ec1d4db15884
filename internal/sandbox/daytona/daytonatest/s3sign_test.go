package daytonatest

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSigV4MatchesAWSExamples: the emulator's canonical request and signature reproduce
// the four worked examples of AWS's "Signature Calculations for the Authorization
// Header: Transferring Payload in a Single Chunk" (Amazon S3 API Reference), so its
// verifier holds the client's signer to S3's algorithm, not to the client's own idea of
// it.
func TestSigV4MatchesAWSExamples(t *testing.T) {
	const (
		secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
		host   = "https://examplebucket.s3.amazonaws.com"
		date   = "20130524T000000Z"
		empty  = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	)
	cases := []struct {
		name, method, target, body string
		headers                    map[string]string
		signed, payload, want      string
	}{
		{name: "GET Object", method: "GET", target: "/test.txt",
			headers: map[string]string{"Range": "bytes=0-9"},
			signed:  "host;range;x-amz-content-sha256;x-amz-date", payload: empty,
			want: "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"},
		{name: "PUT Object", method: "PUT", target: "/test$file.text", body: "Welcome to Amazon S3.",
			headers: map[string]string{"Date": "Fri, 24 May 2013 00:00:00 GMT", "X-Amz-Storage-Class": "REDUCED_REDUNDANCY"},
			signed:  "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
			payload: "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
			want:    "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"},
		{name: "GET Bucket Lifecycle", method: "GET", target: "/?lifecycle",
			signed: "host;x-amz-content-sha256;x-amz-date", payload: empty,
			want: "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"},
		{name: "GET Bucket (List Objects)", method: "GET", target: "/?max-keys=2&prefix=J",
			signed: "host;x-amz-content-sha256;x-amz-date", payload: empty,
			want: "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"},
	}
	for _, tc := range cases {
		r := httptest.NewRequest(tc.method, host+tc.target, strings.NewReader(tc.body))
		r.Header.Set("X-Amz-Date", date)
		r.Header.Set("X-Amz-Content-Sha256", tc.payload)
		for k, v := range tc.headers {
			r.Header.Set(k, v)
		}
		canonical := canonicalRequest(r, strings.Split(tc.signed, ";"), tc.payload)
		if got, _ := sigV4Signature(secret, date[:8], "us-east-1", date, canonical); got != tc.want {
			t.Errorf("%s: signature %s, want AWS's %s; canonical request:\n%s", tc.name, got, tc.want, canonical)
		}
	}
}

// TestPushAccessPolicy: the session policy of object-storage.service.ts:50-72 as the
// emulator evaluates it.
func TestPushAccessPolicy(t *testing.T) {
	p := pushAccessPolicy("b", "org")
	cases := []struct {
		action, resource, prefix string
		hasPrefix, want          bool
	}{
		{"s3:PutObject", "arn:aws:s3:::b/org/h/context.tar", "", false, true},
		{"s3:GetObject", "arn:aws:s3:::b/org/h/context.tar", "", false, true},
		{"s3:PutObject", "arn:aws:s3:::b/other/h/context.tar", "", false, false},
		{"s3:PutObject", "arn:aws:s3:::b/org", "", false, false}, // "org/*" needs the slash
		{"s3:PutObject", "arn:aws:s3:::c/org/h", "", false, false},
		{"s3:DeleteObject", "arn:aws:s3:::b/org/h", "", false, false},
		{"s3:ListBucket", "arn:aws:s3:::b", "org", true, true},
		{"s3:ListBucket", "arn:aws:s3:::b", "org/h/context.tar", true, true},
		{"s3:ListBucket", "arn:aws:s3:::b", "", true, false},
		{"s3:ListBucket", "arn:aws:s3:::b", "", false, false},
		{"s3:ListBucket", "arn:aws:s3:::b", "organization/", true, false},
		{"s3:ListBucket", "arn:aws:s3:::b", "other/", true, false},
	}
	for _, tc := range cases {
		if got := allows(p, tc.action, tc.resource, tc.prefix, tc.hasPrefix); got != tc.want {
			t.Errorf("%s on %s (prefix %q, %v): %v, want %v", tc.action, tc.resource, tc.prefix, tc.hasPrefix, got, tc.want)
		}
	}
}
