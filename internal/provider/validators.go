package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

var (
	nameRe   = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$`)
	envVarRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	labelRe  = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
)

// stringCheck adapts a func that explains what is wrong (or "" when fine) into a
// validator, so each rule is one small function with its own message.
type stringCheck struct {
	desc  string
	check func(string) string
}

func (v stringCheck) Description(context.Context) string         { return v.desc }
func (v stringCheck) MarkdownDescription(context.Context) string { return v.desc }
func (v stringCheck) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if msg := v.check(req.ConfigValue.ValueString()); msg != "" {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Attribute Value", fmt.Sprintf("%s: %s", req.Path, msg))
	}
}

// mapKeysCheck validates every key of a map attribute.
type mapKeysCheck struct {
	desc  string
	check func(string) string
}

func (v mapKeysCheck) Description(context.Context) string         { return v.desc }
func (v mapKeysCheck) MarkdownDescription(context.Context) string { return v.desc }
func (v mapKeysCheck) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for k := range req.ConfigValue.Elements() {
		if msg := v.check(k); msg != "" {
			resp.Diagnostics.AddAttributeError(req.Path, "Invalid Map Key", fmt.Sprintf("%s key %q: %s", req.Path, k, msg))
		}
	}
}

func validName() stringCheck {
	return stringCheck{"a name: lowercase letters, digits, '-' and '_', starting and ending with a letter or digit, at most 63 characters", checkName}
}

func checkName(s string) string {
	if !nameRe.MatchString(s) {
		return fmt.Sprintf("%q is not a valid name; use lowercase letters, digits, '-' and '_', starting and ending with a letter or digit, at most 63 characters", s)
	}
	return ""
}

func validEnvVarName() stringCheck {
	return stringCheck{"an environment variable name such as GITHUB_TOKEN", checkEnvVarName}
}

func checkEnvVarName(s string) string {
	if !envVarRe.MatchString(s) {
		return fmt.Sprintf("%q is not an environment variable name; use letters, digits and '_', not starting with a digit (for example GITHUB_TOKEN)", s)
	}
	return ""
}

// validCredentialEnv is for attributes that name the variable holding a credential
// (api_key_env, credential_env). Pasting the credential itself there is the mistake it
// catches, since that would put the secret into state and the control-plane database.
func validCredentialEnv() stringCheck {
	return stringCheck{"the name of an environment variable of the harness that holds the credential", func(s string) string {
		if looksLikeCredential(s) {
			return "the value looks like a credential, not a variable name. Put the credential in the harness's environment and name the variable here (for example OPENAI_API_KEY); rotate the credential, since it is now in your configuration"
		}
		return checkCredentialEnv(s) // credential_validators.go: the harness's own rule
	}}
}

var credentialPrefixes = []string{"sk-", "sk_", "ghp_", "gho_", "ghs_", "github_pat_", "xoxb-", "xoxp-", "AKIA", "ASIA", "glpat-", "dtn_", "AIza", "hf_", "Bearer ", "eyJ"}

func looksLikeCredential(s string) bool {
	for _, p := range credentialPrefixes {
		if strings.HasPrefix(s, p) && len(s) > len(p)+8 {
			return true
		}
	}
	if len(s) < 24 {
		return false
	}
	// A long token mixing cases and digits is far more likely a key than a variable name,
	// which by convention is upper case.
	var lower, upper, digit bool
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= '0' && r <= '9':
			digit = true
		}
	}
	return lower && upper && digit
}

// checkHost accepts a host name or a "*." wildcard for a secret's hosts: no scheme, port,
// path or IP literal.
func checkHost(s string) string {
	return checkDomain(s, true)
}

func checkDomain(s string, allowTLDWildcard bool) string {
	switch {
	case s == "":
		return "a host must not be empty"
	case strings.Contains(s, "://"):
		return fmt.Sprintf("%q has a scheme; give the host name only (for example api.github.com)", s)
	case strings.ContainsAny(s, "/?#@"):
		return fmt.Sprintf("%q has a path or user part; give the host name only (for example api.github.com)", s)
	case strings.Contains(s, ":") || strings.HasPrefix(s, "["):
		return fmt.Sprintf("%q has a port or is an IPv6 literal; give the host name only, ports are not part of the policy", s)
	case s == "*":
		return `"*" would match every host; list the hosts, or leave the allow list empty for unrestricted egress`
	}
	name := s
	wildcard := strings.HasPrefix(s, "*.")
	if wildcard {
		name = s[2:]
	}
	if strings.Contains(name, "*") {
		return fmt.Sprintf("%q: a wildcard is allowed only as a leading \"*.\" (for example *.github.com)", s)
	}
	labels := strings.Split(strings.ToLower(strings.TrimSuffix(name, ".")), ".")
	if wildcard && len(labels) < 2 && !allowTLDWildcard {
		return fmt.Sprintf("%q matches a whole top-level domain; name a registered domain (for example *.example.com)", s)
	}
	if wildcard && len(labels) < 2 {
		return fmt.Sprintf("%q matches a whole top-level domain; name a registered domain (for example *.example.com)", s)
	}
	allDigits := true
	for _, l := range labels {
		if !labelRe.MatchString(l) {
			return fmt.Sprintf("%q is not a valid host name (label %q)", s, l)
		}
		if strings.Trim(l, "0123456789") != "" {
			allDigits = false
		}
	}
	if allDigits {
		return fmt.Sprintf("%q is an IP address; policies name hosts, not addresses", s)
	}
	return ""
}

func validHost() stringCheck {
	return stringCheck{"a host name or a `*.` wildcard, with no scheme, port or path", checkHost}
}

func validDomain() stringCheck {
	return stringCheck{"an exact host name or `*.suffix` (subdomains only), with no scheme, port or path", func(s string) string { return checkDomain(s, false) }}
}

// noNUL refuses a NUL character in a string, in each value of a map or (with
// listvalidator.ValueStringsAre) in each element of a list. Text that reaches a sandbox
// or a build as a C string (an environment value, an argv element, a script) ends at a
// NUL: an env value with one makes every sandbox fail to start, and a build_script with
// one runs only the text before it. PostgreSQL's TEXT cannot hold one either. why says
// what the NUL would break, for the diagnostic.
func noNUL(why string) nulCheck { return nulCheck{why: why} }

type nulCheck struct{ why string }

func (v nulCheck) Description(context.Context) string {
	return "no NUL character (" + v.why + ")"
}
func (v nulCheck) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v nulCheck) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if msg := v.check(req.Path.String(), req.ConfigValue.ValueString()); msg != "" {
		resp.Diagnostics.AddAttributeError(req.Path, "NUL Character Not Allowed", msg)
	}
}

func (v nulCheck) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for k, e := range req.ConfigValue.Elements() {
		s, ok := e.(types.String)
		if !ok || s.IsNull() || s.IsUnknown() {
			continue
		}
		if msg := v.check(fmt.Sprintf("%s key %q", req.Path, k), s.ValueString()); msg != "" {
			resp.Diagnostics.AddAttributeError(req.Path.AtMapKey(k), "NUL Character Not Allowed", msg)
		}
	}
}

func (v nulCheck) check(what, s string) string {
	i := strings.IndexByte(s, 0)
	if i < 0 {
		return ""
	}
	return fmt.Sprintf("%s contains a NUL character (\\x00) at byte %d: %s. Remove it: look for a \"\\u0000\" escape, "+
		"or a binary file read with file() (encode binary data, for example with base64encode()).", what, i, v.why)
}

// validSecretValue refuses what the egress proxy could not put in a request header: the
// value is substituted into header values (exact, "Bearer x", Basic), where a control
// character other than tab is invalid (a CR or LF would start another header). The usual
// cause is the newline that file() keeps at the end of a token file.
func validSecretValue() stringCheck {
	return stringCheck{"no control characters other than tab", func(s string) string {
		for i := 0; i < len(s); i++ {
			if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
				fix := "remove it"
				if c == '\n' || c == '\r' {
					fix = "a token read with file() keeps its trailing newline: use trimspace(file(...))"
				}
				return fmt.Sprintf("the value has a control character (byte %d is 0x%02x), which the egress proxy cannot send in a request header; %s", i, c, fix)
			}
		}
		return ""
	}}
}
