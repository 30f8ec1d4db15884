// Package policy is the operator's policy for the MCP calls the harness makes for an
// agent: a JSON file of rules, each allowing or denying calls by the calling user, the
// agent, the tool and the tool's arguments. It is consulted after the agent's
// allowed_tools, for every call, whether the model made it directly or a Code Mode
// script made it through the bridge.
//
// The file (docs/guides/mcp-policy.md has the full description):
//
//	{
//	  "rules": [
//	    {"effect": "deny", "users": ["bob"], "tools": ["github__delete_*"], "reason": "Bob may not delete"},
//	    {"effect": "deny", "tools": ["db__query"], "args": {"database": ["prod*"]}},
//	    {"effect": "allow", "agents": ["ops-*"]}
//	  ],
//	  "default": "deny"
//	}
//
// Rules are tried in order and the first that matches decides; when none does,
// "default" does. A rule matches when each of its conditions does (a condition left out
// matches anything): users, agents and tools are lists of patterns of which one must
// match; args maps an argument name to patterns of which one must match the argument's
// value. Patterns are globs in path.Match's syntax, except that "*" also matches "/"
// (so "/etc/*" covers "/etc/ssl/cert.pem", as an operator writing a deny rule expects).
//
// The file is read once, by Load; a change takes effect when the harness loads it again
// (at its next start). A Policy is immutable and safe for concurrent use.
package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Decision is the outcome for one call.
type Decision struct {
	Allow  bool
	Rule   int    // the index of the rule that decided, -1 for the default
	Reason string // the rule's reason, or which rule or default decided
}

// Request is one MCP call to decide.
type Request struct {
	User  string         // the calling user: the session's owner
	Agent string         // the agent's name
	Tool  string         // the model-facing tool name, "<server>__<tool>"
	Args  map[string]any // the call's arguments, as decoded from JSON
}

// Policy is a loaded policy file.
type Policy struct {
	path         string
	rules        []rule
	allowDefault bool
}

type rule struct {
	allow                bool
	users, agents, tools patterns // nil: any
	args                 []argCondition
	reason               string
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
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	p, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", path, err)
	}
	p.path = path
	return p, nil
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
	if !ru.users.match(r.User) || !ru.agents.match(r.Agent) || !ru.tools.match(r.Tool) {
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
	ruleFields = []string{"effect", "users", "agents", "tools", "args", "reason"}
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
			return nil, errors.New(`"rules" must be a list of rule objects: "rules": [{"effect": "deny", "tools": ["..."]}]`)
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
		return ru, fmt.Errorf(`%s: a rule must be a JSON object, like {"effect": "deny", "tools": ["github__delete_*"]}`, at)
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
	}{{"users", &ru.users}, {"agents", &ru.agents}, {"tools", &ru.tools}} {
		if raw, ok := fields[f.name]; ok {
			if *f.into, err = patternList(raw, at+"."+f.name); err != nil {
				return ru, err
			}
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
		re, err := compileGlob(pat)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] %q: %v", at, i, pat, err)
		}
		ps[i] = re
	}
	return ps, nil
}

const loneBackslash = `it ends with a lone backslash, which escapes nothing: a literal backslash is two in the pattern ("\\\\" in JSON)`

// compileGlob turns a glob into an anchored regular expression: "*" is any run of
// characters ("/" included), "?" one character, "[...]" one character of a class
// ("[^...]" outside it, ranges with "-"), and "\" makes the next character literal.
// Regular expressions match in linear time, whatever the pattern or the value.
func compileGlob(pat string) (*regexp.Regexp, error) {
	if pat == "" {
		return nil, errors.New(`an empty pattern matches only an empty value; use "*" to match anything`)
	}
	var b strings.Builder
	b.WriteString(`^(?s:`)
	rs := []rune(pat)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '\\':
			if i+1 == len(rs) {
				return nil, errors.New(loneBackslash)
			}
			i++
			b.WriteString(regexp.QuoteMeta(string(rs[i])))
		case '[':
			end, class, err := globClass(rs, i)
			if err != nil {
				return nil, err
			}
			b.WriteString(class)
			i = end
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString(`)$`)
	return regexp.Compile(b.String())
}

// globClass reads the class that starts at rs[start] == '[' and returns the index of
// its ']' and the class as a regular expression.
func globClass(rs []rune, start int) (int, string, error) {
	var b strings.Builder
	b.WriteByte('[')
	i := start + 1
	if i < len(rs) && rs[i] == '^' {
		b.WriteByte('^')
		i++
	}
	n := 0
	for ; i < len(rs) && rs[i] != ']'; i++ {
		c, escaped := rs[i], false
		if c == '\\' {
			if i+1 == len(rs) {
				return 0, "", errors.New(loneBackslash)
			}
			i++
			c, escaped = rs[i], true
		}
		if n > 0 && c == '-' && !escaped && i+1 < len(rs) && rs[i+1] != ']' {
			b.WriteByte('-') // a range, like a-z
			continue
		}
		if strings.ContainsRune(`\-]^[`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
		n++
	}
	if i >= len(rs) {
		return 0, "", errors.New(`a "[" class is not closed with "]"; write "\[" for a literal bracket`)
	}
	if n == 0 {
		return 0, "", errors.New(`a "[]" class is empty; list characters like "[abc]" or ranges like "[a-z]"`)
	}
	b.WriteByte(']')
	return i, b.String(), nil
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
