package agents

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/configfile"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/glob"
)

// Credentials is the harness operator's credentials file (--credentials): the only
// credentials the harness sends when it has one, each bound to the origins it may go
// to and the owners whose agents may name it. The file is the operator's, like the
// policy file: no `terraform apply` can add a credential, widen where one goes, or
// let another owner's agent use it.
//
//	{
//	  "credentials": [
//	    {"name": "facts", "env": "FACTS_TOKEN", "origins": ["https://facts.example.com"], "owners": ["team_a"]},
//	    {"name": "openai", "env": "OPENAI_API_KEY", "origins": ["https://api.openai.com"], "owners": ["*"]}
//	  ]
//	}
//
// A Credentials is immutable and safe for concurrent use.
type Credentials struct {
	path string
	list []Credential
}

// Credential is one declared credential.
type Credential struct {
	Name string // what agents name (mcp_servers[].credential, model.api_key_credential)
	Env  string // the harness variable holding the value, read at each request
	// Origins are where it may be sent: scheme and host:port, compared exactly.
	Origins []Origin
	// Owners are patterns (package glob; "*" is anyone) of the agent owners allowed.
	Owners []string
	owners []*regexp.Regexp
}

// allows reports whether an agent of owner may use c.
func (c Credential) allows(owner string) bool {
	for _, re := range c.owners {
		if re.MatchString(owner) {
			return true
		}
	}
	return false
}

// boundTo reports whether c may be sent to o.
func (c Credential) boundTo(o Origin) bool { return slices.Contains(c.Origins, o) }

// Path is the file the credentials were read from.
func (c *Credentials) Path() string { return c.path }

// Lookup is the credential named name.
func (c *Credentials) Lookup(name string) (Credential, bool) {
	for _, cr := range c.list {
		if cr.Name == name {
			return cr, true
		}
	}
	return Credential{}, false
}

// LoadCredentials reads and checks the credentials file at path. Every mistake is an
// error naming the file, the credential and the field, and saying what to write.
func LoadCredentials(path string) (*Credentials, error) {
	c, err := configfile.Read(path, "credentials", "credentials file", parseCredentials)
	if err == nil {
		c.path = path
	}
	return c, err
}

var credentialFields = []string{"name", "env", "origins", "owners"}

const credentialExample = `{"name": "facts", "env": "FACTS_TOKEN", "origins": ["https://facts.example.com"], "owners": ["team_a"]}`

func parseCredentials(data []byte) (*Credentials, error) {
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&top); err != nil || top == nil || dec.More() {
		return nil, fmt.Errorf(`the file must be one JSON object, {"credentials": [%s]}`, credentialExample)
	}
	for k := range top {
		if k != "credentials" {
			return nil, fmt.Errorf(`%q is not a field of a credentials file (its one field is "credentials")`, k)
		}
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(top["credentials"], &raws); err != nil || raws == nil {
		return nil, fmt.Errorf(`"credentials" must be a list of credentials, like "credentials": [%s]`, credentialExample)
	}
	c := &Credentials{}
	for i, raw := range raws {
		cr, err := parseCredential(raw, i)
		if err != nil {
			return nil, err
		}
		if _, dup := c.Lookup(cr.Name); dup {
			return nil, fmt.Errorf("credentials[%d].name %q: another credential has this name; give each credential its own name", i, cr.Name)
		}
		c.list = append(c.list, cr)
	}
	return c, nil
}

func parseCredential(raw json.RawMessage, i int) (Credential, error) {
	var cr Credential
	at := fmt.Sprintf("credentials[%d]", i)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return cr, fmt.Errorf("%s: a credential must be a JSON object, like %s", at, credentialExample)
	}
	var name string
	if err := json.Unmarshal(fields["name"], &name); err != nil || name == "" {
		return cr, fmt.Errorf(`%s.name is missing or not a string: name the credential, like "name": "facts" (agents name it in mcp_servers[].credential or model.api_key_credential)`, at)
	}
	if err := agentspec.CheckCredentialName(name); err != nil {
		return cr, fmt.Errorf("%s.name %q: %w", at, name, err)
	}
	at = fmt.Sprintf("credentials[%d] (%q)", i, name)
	for k := range fields {
		if !slices.Contains(credentialFields, k) {
			return cr, fmt.Errorf("%s: %q is not a field of a credential (fields: %s)", at, k, strings.Join(credentialFields, ", "))
		}
	}
	cr.Name = name
	if err := json.Unmarshal(fields["env"], &cr.Env); err != nil || cr.Env == "" {
		return cr, fmt.Errorf(`%s.env is missing or not a string: name the harness variable that holds the credential, like "env": "FACTS_TOKEN"`, at)
	}
	if err := agentspec.CheckCredentialEnv(cr.Env); err != nil {
		return cr, fmt.Errorf("%s.env %q: %w", at, cr.Env, err)
	}
	var origins []string
	if err := json.Unmarshal(fields["origins"], &origins); err != nil || len(origins) == 0 {
		return cr, fmt.Errorf(`%s.origins is missing or empty: list where the credential may be sent (scheme and host, with the port when it is not the scheme's default), like "origins": ["https://facts.example.com"]`, at)
	}
	for j, o := range origins {
		origin, err := parseOrigin(o)
		if err != nil {
			return cr, fmt.Errorf("%s.origins[%d] %q: %w", at, j, o, err)
		}
		cr.Origins = append(cr.Origins, origin)
	}
	if err := json.Unmarshal(fields["owners"], &cr.Owners); err != nil || len(cr.Owners) == 0 {
		return cr, fmt.Errorf(`%s.owners is missing or empty: list the owners whose agents may use the credential (PostgreSQL roles or SQLite owner names; patterns like "team_*"; "*" is anyone), like "owners": ["team_a"]`, at)
	}
	for j, pat := range cr.Owners {
		re, err := glob.Compile(pat)
		if err != nil {
			return cr, fmt.Errorf("%s.owners[%d] %q: %w", at, j, pat, err)
		}
		cr.owners = append(cr.owners, re)
	}
	return cr, nil
}

// parseOrigin reads an origin of a credentials file: an http(s) URL with a host and no
// path, query, fragment or user. Plain http is accepted only for a loopback host, as
// for an agent's URL: the value would cross the network in clear text.
func parseOrigin(s string) (Origin, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Origin{}, errors.New("not a URL; write scheme and host, like https://facts.example.com")
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "https" && scheme != "http":
		return Origin{}, errors.New("an origin is https:// (or http:// for a loopback host) and a host, like https://facts.example.com")
	case u.Host == "" || u.User != nil:
		return Origin{}, errors.New("no host (or a user part); write scheme and host, like https://facts.example.com")
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return Origin{}, errors.New("an origin has no path: the credential is bound to scheme and host:port, every path on it; write it without the path, like https://facts.example.com")
	case scheme == "http" && !IsLoopbackHost(u.Hostname()):
		return Origin{}, errors.New("plain http:// would send the credential in clear text to another machine; use https:// (plain http is allowed only for localhost, 127.0.0.0/8 and ::1)")
	}
	return OriginOf(u), nil
}
