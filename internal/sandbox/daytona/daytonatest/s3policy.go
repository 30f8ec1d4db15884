package daytonatest

import (
	"net/http"
	"strings"
)

// policyStatement is one Allow statement of an IAM policy; with prefixLike set it holds
// only when the request's s3:prefix condition key is StringLike one of them (absent
// key: the condition, and so the statement, does not hold).
type policyStatement struct {
	actions, resources, prefixLike []string
}

// pushAccessPolicy is the session policy the v0.190 API puts on the credentials of GET
// /object-storage/push-access (apps/api/src/object-storage/services/
// object-storage.service.ts:50-72, passed to STS AssumeRole at :94 and :152). What the
// credentials may do is the intersection of it and the assumed role's own policy; the
// emulator's role allows everything, so the session policy alone decides.
func pushAccessPolicy(bucket, org string) []policyStatement {
	return []policyStatement{
		// object-storage.service.ts:53-57.
		{actions: []string{"s3:PutObject", "s3:GetObject"}, resources: []string{"arn:aws:s3:::" + bucket + "/" + org + "/*"}},
		// object-storage.service.ts:62-71: ListBucket only for the organization's prefixes.
		{actions: []string{"s3:ListBucket"}, resources: []string{"arn:aws:s3:::" + bucket},
			prefixLike: []string{org, org + "/*"}},
	}
}

// allows reports whether a statement of p allows action on resource; prefix is the
// request's s3:prefix (ListObjects' prefix parameter), absent when hasPrefix is false.
func allows(p []policyStatement, action, resource, prefix string, hasPrefix bool) bool {
	for _, st := range p {
		if !anyLike(st.actions, action) || !anyLike(st.resources, resource) {
			continue
		}
		if st.prefixLike != nil && (!hasPrefix || !anyLike(st.prefixLike, prefix)) {
			continue
		}
		return true
	}
	return false
}

func anyLike(patterns []string, s string) bool {
	for _, p := range patterns {
		if like(p, s) {
			return true
		}
	}
	return false
}

// like is IAM's wildcard match (StringLike and ARNs): '*' any run of characters, slashes
// included, '?' any one character.
func like(pattern, s string) bool {
	for pattern != "" {
		switch pattern[0] {
		case '*':
			rest := strings.TrimLeft(pattern, "*")
			if rest == "" {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if like(rest, s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
		default:
			if s == "" || s[0] != pattern[0] {
				return false
			}
		}
		pattern, s = pattern[1:], s[1:]
	}
	return s == ""
}

// accessDenied is S3's 403 for a request no statement allows, with the message AWS gives
// an assumed role refused by its session policy.
func accessDenied(action, resource string) *s3Err {
	return &s3Err{status: http.StatusForbidden, code: "AccessDenied",
		message: "User: arn:aws:sts::000000000000:assumed-role/daytona-push/daytona-" + OrganizationID +
			" is not authorized to perform: " + action + " on resource: \"" + resource +
			"\" because no session policy allows the " + action + " action"}
}
