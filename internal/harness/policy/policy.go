// Package policy is the operator's policy for the MCP calls the harness makes for an
// agent: a JSON file of rules, each allowing, denying or holding for approval calls by
// the calling user, the agent's owner, the MCP server (its URL), the tool and the
// tool's arguments; cumulative budgets on calls, result bytes, model tokens and sandbox
// time; the servers whose sampling requests may run on the agent's model; and who may
// download the files agents offer, by their classification (downloads.go). It is
// consulted after the agent's allowed_tools, for every call, whether the model made it
// directly or a Code Mode script made it through the bridge.
//
// The file (docs/guides/mcp-policy.md has the full description):
//
//	{
//	  "rules": [
//	    {"effect": "deny", "users": ["bob"], "servers": ["https://api.githubcopilot.com"], "tools": ["delete_*"], "reason": "Bob may not delete"},
//	    {"effect": "approve", "servers": ["https://api.githubcopilot.com"], "tools": ["create_pull_request"], "approvers": ["$caller", "lead_*"], "timeout": "30m"},
//	    {"effect": "deny", "servers": ["https://db.example.com"], "tools": ["query"], "args": {"database": ["prod*"]}},
//	    {"effect": "allow", "owners": ["ops-*"]}
//	  ],
//	  "default": "deny",
//	  "budgets": [
//	    {"name": "prs", "servers": ["https://api.githubcopilot.com"], "tools": ["create_pull_request"], "per": ["user"], "window": "per_day", "calls": 20}
//	  ],
//	  "sampling": ["https://facts.example.com"],
//	  "downloads": {"confidential": {"users": ["auditor"], "roles": ["owner", "admin"]}}
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
// choose it). Budgets' conditions and counters follow the same principle.
//
// This package only decides and describes: the harness waits for approvals, keeps the
// budgets' counters and answers sampling requests.
//
// The file is read once, by Load; a change takes effect when the harness loads it again
// (at its next start). A Policy is immutable and safe for concurrent use.
package policy

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/configfile"
)

// Effect is what a rule does to the calls it matches.
type Effect string

// The effects a rule may have.
const (
	EffectAllow   Effect = "allow"   // the call goes ahead
	EffectDeny    Effect = "deny"    // the call is refused
	EffectApprove Effect = "approve" // the call waits for one of the rule's approvers
)

// Decision is the outcome for one call.
type Decision struct {
	// Allow is whether the call may go ahead now: true for effect allow only, so that a
	// caller that looks at Allow alone refuses a call that needs approval rather than
	// making it unapproved.
	Allow  bool
	Effect Effect
	Rule   int    // the index of the rule that decided, -1 for the default
	Reason string // the rule's reason, or which rule or default decided
	// Approval is who may approve the call and for how long it waits; set when Effect
	// is EffectApprove. It is the decision's own copy.
	Approval *ApprovalRule
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
	budgets      []Budget
	sampling     []serverPattern // nil: no server may sample
	// downloads is who may download each classification the file names (downloads.go).
	downloads map[string]Recipients
}

type rule struct {
	effect   Effect
	approval *ApprovalRule // for EffectApprove
	conditions
	args   []argCondition
	reason string
}

// conditions are what rules and budgets match a call or an agent by.
type conditions struct {
	users, owners, agents, tools patterns // nil: any
	servers                      []serverPattern
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
// file, the rule or budget and the field, and saying how to fix it.
func Load(path string) (*Policy, error) {
	p, err := configfile.Read(path, "policy", "policy", parse)
	if err == nil {
		p.path = path
	}
	return p, err
}

// Decide returns whether the call r may go ahead, is refused or waits for approval:
// the first rule that matches it decides, else the default. A nil Policy (no policy
// file) allows everything.
func (p *Policy) Decide(r Request) Decision {
	if p == nil {
		return Decision{Allow: true, Effect: EffectAllow, Rule: -1, Reason: "no policy file"}
	}
	for i, ru := range p.rules {
		if !ru.matches(r) {
			continue
		}
		reason := ru.reason
		if reason == "" {
			reason = fmt.Sprintf("rule %d of the policy (%s)", i, ru.effect)
		}
		d := Decision{Allow: ru.effect == EffectAllow, Effect: ru.effect, Rule: i, Reason: reason}
		if ru.approval != nil {
			// A copy, so that no caller can change the rule for the next call.
			a := *ru.approval
			a.Approvers = slices.Clone(a.Approvers)
			d.Approval = &a
		}
		return d
	}
	e := defaultEffect(p.allowDefault)
	return Decision{Allow: p.allowDefault, Effect: e, Rule: -1, Reason: "no rule of the policy matched; its default is " + string(e)}
}

// AllowsSampling reports whether the server at serverURL may have its
// sampling/createMessage requests run on the agent's model: only servers the policy
// lists under "sampling" may, since a sampling request spends the agent's model on the
// server's prompt. A nil Policy allows none.
func (p *Policy) AllowsSampling(serverURL string) bool {
	return p != nil && matchServer(p.sampling, serverURL)
}

// String names the policy by its file, for logs.
func (p *Policy) String() string {
	if p == nil {
		return "no policy"
	}
	return fmt.Sprintf("policy %s (%d rules, default %s)", p.path, len(p.rules), defaultEffect(p.allowDefault))
}

func defaultEffect(allow bool) Effect {
	if allow {
		return EffectAllow
	}
	return EffectDeny
}

func (ru *rule) matches(r Request) bool {
	if !ru.matchCall(r.User, r.Owner, r.Agent, r.Server, r.Tool) {
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

// matchCall reports whether the conditions match a call by user to tool on server,
// through agent, published by owner.
func (c *conditions) matchCall(user, owner, agent, server, tool string) bool {
	if !c.matchAgent(user, owner, agent) || !c.tools.match(tool) {
		return false
	}
	return c.servers == nil || matchServer(c.servers, server)
}

// matchAgent reports whether the conditions on who (users, owners, agents) match.
func (c *conditions) matchAgent(user, owner, agent string) bool {
	return c.users.match(user) && c.owners.match(owner) && c.agents.match(agent)
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
