package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/glob"
)

// The fields each object may have, in the order the unknown-field errors list them.
var (
	topFields  = []string{"rules", "default", "budgets", "sampling", "downloads"}
	ruleFields = []string{"effect", "users", "owners", "agents", "servers", "tools", "args", "reason", "approvers", "timeout"}
)

func parse(data []byte) (*Policy, error) {
	var top map[string]json.RawMessage
	if err := decode(data, &top); err != nil {
		return nil, syntaxError(data, err, "the file must be one JSON object with \"rules\" and \"default\"")
	}
	if top == nil {
		return nil, errors.New(`the file must be one JSON object with "rules" and "default", not null`)
	}
	if err := knownFields(top, topFields, "", "a policy file"); err != nil {
		return nil, err
	}
	p := &Policy{}
	raw, ok := top["default"]
	if !ok {
		return nil, errors.New(`"default" is missing: add "default": "deny" (calls no rule matches are refused) or "default": "allow"`)
	}
	var err error
	if p.allowDefault, err = defaultValue(raw); err != nil {
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
	if raw, ok := top["budgets"]; ok {
		if p.budgets, err = parseBudgets(raw); err != nil {
			return nil, err
		}
	}
	if raw, ok := top["sampling"]; ok {
		if p.sampling, err = parseSampling(raw); err != nil {
			return nil, err
		}
	}
	if raw, ok := top["downloads"]; ok {
		if p.downloads, err = parseDownloads(raw); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func parseRule(data json.RawMessage, at string) (rule, error) {
	var ru rule
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return ru, fmt.Errorf(`%s: a rule must be a JSON object, like {"effect": "deny", "servers": ["https://api.githubcopilot.com"], "tools": ["delete_*"]}`, at)
	}
	if err := knownFields(fields, ruleFields, at+".", "a rule"); err != nil {
		return ru, err
	}
	raw, ok := fields["effect"]
	if !ok {
		return ru, fmt.Errorf(`%s.effect is missing: add "effect": "allow", "effect": "deny" or "effect": "approve" (with "approvers")`, at)
	}
	var err error
	if ru.effect, err = ruleEffect(raw, at+".effect"); err != nil {
		return ru, err
	}
	if ru.conditions, err = parseConditions(fields, at); err != nil {
		return ru, err
	}
	if raw, ok := fields["args"]; ok {
		if ru.args, err = parseArgs(raw, at); err != nil {
			return ru, err
		}
	}
	if raw, ok := fields["reason"]; ok {
		if err := json.Unmarshal(raw, &ru.reason); err != nil {
			return ru, fmt.Errorf(`%s.reason must be a string, like "reason": "production data is off limits"`, at)
		}
	}
	if ru.approval, err = parseApproval(fields, ru.effect, at); err != nil {
		return ru, err
	}
	return ru, nil
}

// parseConditions reads the conditions rules and budgets share: users, owners,
// agents, tools and servers.
func parseConditions(fields map[string]json.RawMessage, at string) (conditions, error) {
	var c conditions
	var err error
	for _, f := range []struct {
		name string
		into *patterns
	}{{"users", &c.users}, {"owners", &c.owners}, {"agents", &c.agents}, {"tools", &c.tools}} {
		if raw, ok := fields[f.name]; ok {
			if *f.into, err = patternList(raw, at+"."+f.name); err != nil {
				return c, err
			}
		}
	}
	if err := authorChosen(fields, at); err != nil {
		return c, err
	}
	if raw, ok := fields["servers"]; ok {
		if c.servers, err = serverList(raw, at+".servers"); err != nil {
			return c, err
		}
	}
	return c, nil
}

func parseArgs(raw json.RawMessage, at string) ([]argCondition, error) {
	var args map[string]json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil || args == nil {
		return nil, fmt.Errorf(`%s.args must be an object of argument names to lists of patterns, like "args": {"database": ["prod*"]}`, at)
	}
	if len(args) == 0 {
		return nil, fmt.Errorf(`%s.args is empty: name at least one argument, or leave "args" out to match any arguments`, at)
	}
	names := make([]string, 0, len(args))
	for name := range args {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]argCondition, 0, len(names))
	for _, name := range names {
		pats, err := patternList(args[name], fmt.Sprintf("%s.args[%s]", at, strconv.Quote(name)))
		if err != nil {
			return nil, err
		}
		out = append(out, argCondition{name: name, pats: pats})
	}
	return out, nil
}

// parseSampling reads the servers that may sample. An empty list is the same as none
// listed, which is what it says, so unlike an empty servers condition it is no trap.
func parseSampling(raw json.RawMessage) ([]serverPattern, error) {
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf(`"sampling" must be a list of server URL patterns whose sampling requests may run on the agent's model, like "sampling": ["https://facts.example.com"], not %s`, clip(string(bytes.TrimSpace(raw))))
	}
	if len(list) == 0 {
		return nil, nil
	}
	return serverList(raw, "sampling")
}

// authorChosen refuses the conditions that would let an agent's author decide a rule
// or a budget: a tools pattern in the old "<name>__<tool>" form (the name is the
// agent's choice, and tools now match the server's own tool name, so such a pattern
// would silently match nothing), and agents without owners (an agent's name is its
// author's choice).
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
			return fmt.Errorf(`%s.agents: an agent's name is chosen by whoever publishes the agent, so a condition on agents alone is sidestepped by another name. `+
				`Add "owners" (the owners whose agents it is about: PostgreSQL roles or SQLite owner names, like "owners": ["ops"]), or match the agents' owners instead of their names`, at)
		}
	}
	return nil
}

// serverList reads a list of server URL patterns, each with a scheme.
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
			return nil, fmt.Errorf("%s[%d] %q: %w", at, i, pat, err)
		}
		out[i] = serverPattern{re: re, withPath: withPath}
	}
	return out, nil
}

// defaultValue reads "default": allow or deny. Approval is refused there, since who
// approves is a rule's to say.
func defaultValue(raw json.RawMessage) (bool, error) {
	var s string
	_ = json.Unmarshal(raw, &s)
	switch Effect(s) {
	case EffectAllow:
		return true, nil
	case EffectDeny:
		return false, nil
	case EffectApprove:
		return false, errors.New(`default is "approve": it must be "allow" or "deny", since who approves is a rule's to say; ` +
			`to hold every call no other rule matches for approval, end "rules" with {"effect": "approve", "approvers": ["$caller"]}`)
	}
	return false, fmt.Errorf(`default is %s: it must be "allow" or "deny"`, bytes.TrimSpace(raw))
}

func ruleEffect(raw json.RawMessage, at string) (Effect, error) {
	var s string
	_ = json.Unmarshal(raw, &s)
	switch e := Effect(s); e {
	case EffectAllow, EffectDeny, EffectApprove:
		return e, nil
	}
	return "", fmt.Errorf(`%s is %s: it must be "allow" or "deny" (or "approve", with "approvers")`, at, bytes.TrimSpace(raw))
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
			return nil, fmt.Errorf("%s[%d] %q: %w", at, i, pat, err)
		}
		ps[i] = re
	}
	return ps, nil
}

// knownFields fails on a field that is not one of known, suggesting the closest. what
// names the object ("a rule").
func knownFields(fields map[string]json.RawMessage, known []string, at, what string) error {
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
	msg := fmt.Sprintf("%s%s is not a field of %s", at, strconv.Quote(k), what)
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

// closest is the known word within two edits of s (ignoring case), or "".
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
		return fmt.Errorf("line %d, column %d: %w (%s)", line, col, err, want)
	case errors.As(err, &te):
		return fmt.Errorf("%s, not a JSON %s", want, te.Value)
	case len(bytes.TrimSpace(data)) == 0:
		return fmt.Errorf("the file is empty (%s)", want)
	}
	return fmt.Errorf("%w (%s)", err, want)
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
