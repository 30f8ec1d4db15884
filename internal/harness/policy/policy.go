// Package policy is the operator's policy for the MCP calls the harness makes for an
// agent: a JSON file of rules, each allowing or denying calls by the calling user, the
// agent's owner, the MCP server (its URL), the tool and the tool's arguments. It is
// consulted after the agent's allowed_tools, for every call, whether the model made it
// directly or a Code Mode script made it through the bridge.
//
// The file (docs/guides/mcp-policy.md has the full description):
//
//	{
//	  "rules": [
//	    {"effect": "deny", "users": ["bob"], "servers": ["https://api.githubcopilot.com"], "tools": ["delete_*"], "reason": "Bob may not delete"},
//	    {"effect": "deny", "servers": ["https://db.example.com"], "tools": ["query"], "args": {"database": ["prod*"]}},
//	    {"effect": "allow", "owners": ["ops-*"]}
//	  ],
//	  "default": "deny"
//	}
//
// Rules are tried in order and the first that matches decides; when none does,
// "default" does. A rule matches when each of its conditions does (a condition left out
// matches anything): users, owners, agents, servers and tools are lists of patterns of
// which one must match; args maps an argument name to patterns of which one must match
// the argument's value. Patterns are globs (package glob): path.Match's syntax, except
// that "*" also matches "/" (so "/etc/*" covers "/etc/ssl/cert.pem", as an operator
// writing a deny rule expects).
//
// The conditions match what the operator controls, so that no `terraform apply` can
// step around a rule: servers match the server's URL (not the name an agent gives it),
// tools the server's own tool name (not "<name>__<tool>", whose prefix is the agent's
// author's choice), owners the agent's owner (a PostgreSQL role, an SQLite owner). What
// an agent's author chooses is refused where it would decide alone: a tools pattern
// with "__" (the old "<name>__<tool>" form), and agents in a rule without owners (an
// agent's name is its author's choice; with owners, only owners the operator named
// choose it).
//
// The file is read once, by Load; a change takes effect when the harness loads it again
// (at its next start). A Policy is immutable and safe for concurrent use.
package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/configfile"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/glob"
)

// Decision is the outcome for one call.
type Decision struct {
	Allow  bool
	Rule   int    // the index of the rule that decided, -1 for the default
	Reason string // the rule's reason, or which rule or default decided
}

// Request is one MCP call to decide.
type Request struct {
	User  string // the calling user: the session's owner
	Owner string // the agent's owner: the PostgreSQL role or SQLite owner that published it
	Agent string // the agent's name (its author's choice)
	// Server is the MCP server's URL as the agent's spec gives it (the URL the harness
	// connects to); servers patterns match its origin or its origin and path.
	Server string
	Tool   string         // the server's own name for the tool (not "<name>__<tool>")
	Args   map[string]any // the call's arguments, as decoded from JSON
}

// Policy is a loaded policy file.
type Policy struct {
	path         string
	rules        []rule
	allowDefault bool
}

type rule struct {
	allow                        bool
	users, owners, agents, tools patterns // nil: any
	servers                      []serverPattern
	args                         []argCondition
	reason                       string
}

// serverPattern matches a server's URL: its origin ("https://facts.example.com", the
// default port left out) when the pattern has no path, else its origin and path. An
// origin pattern never looks at the path, so "https://*.example.com" cannot be met by
// https://evil.example/.example.com.
type serverPattern struct {
	re       *regexp.Regexp
	withPath bool
}

type argCondition struct {
	name string
	pats patterns
}

// patterns is a list of compiled globs; one matching is enough.
type patterns []*regexp.Regexp

func (ps patterns) match(s string) bool {
	if ps == nil {
		return true
	}
	for _, p := range ps {
		if p.MatchString(s) {
			return true
		}
	}
	return false
}

// Load reads and checks the policy file at path. Every mistake is an error naming the
// file, the rule and the field, and saying how to fix it.
func Load(path string) (*Policy, error) {
	p, err := configfile.Read(path, "policy", "policy", parse)
	if err == nil {
		p.path = path
	}
	return p, err
}

// Decide returns whether the call r may go ahead: the first rule that matches it
// decides, else the default. A nil Policy (no policy file) allows everything.
func (p *Policy) Decide(r Request) Decision {
	if p == nil {
		return Decision{Allow: true, Rule: -1, Reason: "no policy file"}
	}
	for i, ru := range p.rules {
		if ru.matches(r) {
			reason := ru.reason
			if reason == "" {
				reason = fmt.Sprintf("rule %d of the policy (%s)", i, effectName(ru.allow))
			}
			return Decision{Allow: ru.allow, Rule: i, Reason: reason}
		}
	}
	return Decision{Allow: p.allowDefault, Rule: -1, Reason: "no rule of the policy matched; its default is " + effectName(p.allowDefault)}
}

// String names the policy by its file, for logs.
func (p *Policy) String() string {
	if p == nil {
		return "no policy"
	}
	return fmt.Sprintf("policy %s (%d rules, default %s)", p.path, len(p.rules), effectName(p.allowDefault))
}

func (ru *rule) matches(r Request) bool {
	if !ru.users.match(r.User) || !ru.owners.match(r.Owner) || !ru.agents.match(r.Agent) || !ru.tools.match(r.Tool) {
		return false
	}
	if ru.servers != nil && !matchServer(ru.servers, r.Server) {
		return false
	}
	for _, c := range ru.args {
		v, ok := argText(r.Args[c.name])
		if !ok || !c.pats.match(v) {
			return false
		}
	}
	return true
}

// argText is an argument value as the text patterns match: a string as it is, a number
// or a boolean as JSON spells it. Other values (absent, null, objects, arrays) have no
// text and match no pattern.
func argText(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case float32:
		return strconv.FormatFloat(float64(v), 'f', -1, 32), true
	case json.Number:
		return v.String(), true
	case int:
		return strconv.Itoa(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	}
	return "", false
}

func effectName(allow bool) string {
	if allow {
		return "allow"
	}
	return "deny"
}

// ---- Parsing ----

var (
	topFields  = []string{"rules", "default"}
	ruleFields = []string{"effect", "users", "owners", "agents", "servers", "tools", "args", "reason"}
)

func parse(data []byte) (*Policy, error) {
	var top map[string]json.RawMessage
	if err := decode(data, &top); err != nil {
		return nil, syntaxError(data, err, "the file must be one JSON object with \"rules\" and \"default\"")
	}
	if top == nil {
		return nil, errors.New(`the file must be one JSON object with "rules" and "default", not null`)
	}
	if err := knownFields(top, topFields, ""); err != nil {
		return nil, err
	}
	p := &Policy{}
	raw, ok := top["default"]
	if !ok {
		return nil, errors.New(`"default" is missing: add "default": "deny" (calls no rule matches are refused) or "default": "allow"`)
	}
	var err error
	if p.allowDefault, err = effect(raw, "default"); err != nil {
		return nil, err
	}
	var rules []json.RawMessage
	if raw, ok := top["rules"]; ok {
		if err := json.Unmarshal(raw, &rules); err != nil {
			return nil, errors.New(`"rules" must be a list of rule objects: "rules": [{"effect": "deny", "servers": ["https://..."], "tools": ["..."]}]`)
		}
	}
	for i, raw := range rules {
		ru, err := parseRule(raw, fmt.Sprintf("rules[%d]", i))
		if err != nil {
			return nil, err
		}
		p.rules = append(p.rules, ru)
	}
	return p, nil
}

func parseRule(data json.RawMessage, at string) (rule, error) {
	var ru rule
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return ru, fmt.Errorf(`%s: a rule must be a JSON object, like {"effect": "deny", "servers": ["https://api.githubcopilot.com"], "tools": ["delete_*"]}`, at)
	}
	if err := knownFields(fields, ruleFields, at+"."); err != nil {
		return ru, err
	}
	raw, ok := fields["effect"]
	if !ok {
		return ru, fmt.Errorf(`%s.effect is missing: add "effect": "allow" or "effect": "deny"`, at)
	}
	var err error
	if ru.allow, err = effect(raw, at+".effect"); err != nil {
		return ru, err
	}
	for _, f := range []struct {
		name string
		into *patterns
	}{{"users", &ru.users}, {"owners", &ru.owners}, {"agents", &ru.agents}, {"tools", &ru.tools}} {
		if raw, ok := fields[f.name]; ok {
			if *f.into, err = patternList(raw, at+"."+f.name); err != nil {
				return ru, err
			}
		}
	}
	if err := authorChosen(fields, at); err != nil {
		return ru, err
	}
	if raw, ok := fields["servers"]; ok {
		if ru.servers, err = serverList(raw, at+".servers"); err != nil {
			return ru, err
		}
	}
	if raw, ok := fields["args"]; ok {
		var args map[string]json.RawMessage
		if err := json.Unmarshal(raw, &args); err != nil || args == nil {
			return ru, fmt.Errorf(`%s.args must be an object of argument names to lists of patterns, like "args": {"database": ["prod*"]}`, at)
		}
		if len(args) == 0 {
			return ru, fmt.Errorf(`%s.args is empty: name at least one argument, or leave "args" out to match any arguments`, at)
		}
		names := make([]string, 0, len(args))
		for name := range args {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			pats, err := patternList(args[name], fmt.Sprintf("%s.args[%s]", at, strconv.Quote(name)))
			if err != nil {
				return ru, err
			}
			ru.args = append(ru.args, argCondition{name: name, pats: pats})
		}
	}
	if raw, ok := fields["reason"]; ok {
		if err := json.Unmarshal(raw, &ru.reason); err != nil {
			return ru, fmt.Errorf(`%s.reason must be a string, like "reason": "production data is off limits"`, at)
		}
	}
	return ru, nil
}

// authorChosen refuses the conditions that would let an agent's author decide a rule:
// a tools pattern in the old "<name>__<tool>" form (the name is the agent's choice, and
// tools now match the server's own tool name, so such a pattern would silently match
// nothing), and agents without owners (an agent's name is its author's choice).
func authorChosen(fields map[string]json.RawMessage, at string) error {
	if raw, ok := fields["tools"]; ok {
		var list []string
		_ = json.Unmarshal(raw, &list)
		for i, pat := range list {
			if strings.Contains(pat, "__") {
				return fmt.Errorf(`%s.tools[%d] %q: tools match the server's own tool name, not the "<name>__<tool>" the model sees, whose prefix the agent's author chooses (another agent could publish the same server under another name). `+
					`Name the server by its URL and the tool by its own name, like "servers": ["https://facts.example.com"], "tools": ["capital"] (a tool whose own name has "__" is written with "\_\_")`, at, i, pat)
			}
		}
	}
	if _, ok := fields["agents"]; ok {
		if _, ok := fields["owners"]; !ok {
			return fmt.Errorf(`%s.agents: an agent's name is chosen by whoever publishes the agent, so a rule on agents alone is sidestepped by another name. `+
				`Add "owners" (the owners whose agents the rule is about: PostgreSQL roles or SQLite owner names, like "owners": ["ops"]), or match the agents' owners instead of their names`, at)
		}
	}
	return nil
}

// serverList reads the servers condition: patterns of URLs, each with a scheme.
func serverList(raw json.RawMessage, at string) ([]serverPattern, error) {
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil || list == nil {
		return nil, fmt.Errorf(`%s must be a list of server URL patterns, like ["https://facts.example.com"], not %s`, at, clip(string(bytes.TrimSpace(raw))))
	}
	if len(list) == 0 {
		return nil, fmt.Errorf(`%s is an empty list, which would match nothing: list at least one server URL, or leave the field out to match any server`, at)
	}
	out := make([]serverPattern, len(list))
	for i, pat := range list {
		scheme, rest, ok := strings.Cut(pat, "://")
		if pat != "*" && (!ok || scheme == "" || rest == "") {
			return nil, fmt.Errorf(`%s[%d] %q: servers match the MCP server's URL, not the name an agent gives it; write its scheme and host, like "https://facts.example.com" (any path on it) or "https://facts.example.com/mcp"`, at, i, pat)
		}
		host, path, withPath := strings.Cut(rest, "/")
		norm := pat
		if ok {
			// Scheme and host are compared as URLs compare them: without case, and
			// with the scheme's default port left out.
			norm = strings.ToLower(scheme) + "://" + dropDefaultPort(strings.ToLower(scheme), strings.ToLower(host))
			if withPath {
				norm += "/" + path
			}
		}
		re, err := glob.Compile(norm)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] %q: %v", at, i, pat, err)
		}
		out[i] = serverPattern{re: re, withPath: withPath}
	}
	return out, nil
}

func dropDefaultPort(scheme, hostPort string) string {
	switch {
	case scheme == "https" && strings.HasSuffix(hostPort, ":443"):
		return strings.TrimSuffix(hostPort, ":443")
	case scheme == "http" && strings.HasSuffix(hostPort, ":80"):
		return strings.TrimSuffix(hostPort, ":80")
	}
	return hostPort
}

// matchServer reports whether the server at rawURL matches one of pats. A URL that
// does not parse, or has no host, matches no pattern but "*".
func matchServer(pats []serverPattern, rawURL string) bool {
	origin, full := "", ""
	if u, err := url.Parse(rawURL); err == nil && u.Host != "" {
		scheme := strings.ToLower(u.Scheme)
		origin = scheme + "://" + dropDefaultPort(scheme, strings.ToLower(u.Host))
		full = origin + u.EscapedPath()
		if !strings.HasPrefix(u.EscapedPath(), "/") {
			full = origin + "/" + u.EscapedPath()
		}
	}
	for _, p := range pats {
		s := origin
		if p.withPath {
			s = full
		}
		if p.re.MatchString(s) {
			return true
		}
	}
	return false
}

func effect(raw json.RawMessage, at string) (bool, error) {
	var s string
	_ = json.Unmarshal(raw, &s)
	switch s {
	case "allow":
		return true, nil
	case "deny":
		return false, nil
	}
	return false, fmt.Errorf(`%s is %s: it must be "allow" or "deny"`, at, bytes.TrimSpace(raw))
}

func patternList(raw json.RawMessage, at string) (patterns, error) {
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil || list == nil {
		return nil, fmt.Errorf(`%s must be a list of patterns, like ["prod*"], not %s`, at, clip(string(bytes.TrimSpace(raw))))
	}
	if len(list) == 0 {
		return nil, fmt.Errorf(`%s is an empty list, which would match nothing: list at least one pattern, or leave the field out to match anything`, at)
	}
	ps := make(patterns, len(list))
	for i, pat := range list {
		re, err := glob.Compile(pat)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] %q: %v", at, i, pat, err)
		}
		ps[i] = re
	}
	return ps, nil
}

// knownFields fails on a field that is not one of known, suggesting the closest.
func knownFields(fields map[string]json.RawMessage, known []string, at string) error {
	var unknown []string
	for k := range fields {
		if !contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	k := unknown[0]
	msg := fmt.Sprintf("%s%s is not a field of ", at, strconv.Quote(k))
	if at == "" {
		msg += "a policy file"
	} else {
		msg += "a rule"
	}
	if s := closest(k, known); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return errors.New(msg + " (fields: " + strings.Join(known, ", ") + ")")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// closest is the known field within two edits of s (ignoring case), or "".
func closest(s string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := distance(strings.ToLower(s), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// decode reads exactly one JSON value from data.
func decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("text after the JSON object")
	}
	return nil
}

// syntaxError says where in the file JSON went wrong, as line:column.
func syntaxError(data []byte, err error, want string) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := position(data, se.Offset)
		return fmt.Errorf("line %d, column %d: %v (%s)", line, col, err, want)
	case errors.As(err, &te):
		return fmt.Errorf("%s, not a JSON %s", want, te.Value)
	case len(bytes.TrimSpace(data)) == 0:
		return fmt.Errorf("the file is empty (%s)", want)
	}
	return fmt.Errorf("%v (%s)", err, want)
}

// position is the line and column (from 1) of the byte before offset, where
// encoding/json's offsets point just past the character it could not read.
func position(data []byte, offset int64) (line, col int) {
	at := int(min(max(offset-1, 0), int64(len(data))))
	line = bytes.Count(data[:at], []byte("\n")) + 1
	col = at - bytes.LastIndexByte(data[:at], '\n')
	return line, col
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}
