package policy

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/glob"
)

// Caller is the approvers entry that means the session's own user: the user whose
// agent made the call confirms it.
const Caller = "$caller"

// The bounds of an approve rule's timeout: long enough for a person to answer, and
// short enough that a forgotten call does not hold its session (and its sandbox) for
// days.
const (
	DefaultApprovalTimeout = 10 * time.Minute
	MinApprovalTimeout     = time.Second
	MaxApprovalTimeout     = 24 * time.Hour
)

// ApprovalRule is who may approve the calls an approve rule matches, and how long a
// call waits for them before it is refused.
type ApprovalRule struct {
	Approvers []string // user patterns as written; Caller is the session's own user
	Timeout   time.Duration
}

// MayDecide reports whether user may decide (approve or refuse) a call that caller,
// the session's user, made. A nil rule lets no one decide.
func (a *ApprovalRule) MayDecide(user, caller string) bool {
	return a != nil && MayDecide(a.Approvers, user, caller)
}

// MayDecide reports whether user may decide a call that caller made, by approver
// patterns as an approve rule writes them (and as the harness stores them with a
// pending call, so that a decision is checked against the rule the call was held by,
// not whatever rule the policy has since). Caller matches caller alone; other entries
// are globs, and one that does not compile matches no one. An empty user never
// decides: a decision must be someone's.
func MayDecide(approvers []string, user, caller string) bool {
	if user == "" {
		return false
	}
	for _, a := range approvers {
		if a == Caller {
			if user == caller {
				return true
			}
			continue
		}
		if re, err := glob.Compile(a); err == nil && re.MatchString(user) {
			return true
		}
	}
	return false
}

// parseApproval reads an approve rule's approvers and timeout, and refuses them on
// other rules (where they would suggest a wait that never happens).
func parseApproval(fields map[string]json.RawMessage, effect Effect, at string) (*ApprovalRule, error) {
	rawApprovers, hasApprovers := fields["approvers"]
	rawTimeout, hasTimeout := fields["timeout"]
	if effect != EffectApprove {
		for _, f := range []struct {
			name string
			has  bool
		}{{"approvers", hasApprovers}, {"timeout", hasTimeout}} {
			if f.has {
				return nil, fmt.Errorf(`%s.%s: only an "approve" rule waits for approvers, and this rule's effect is %q: `+
					`remove %q, or make the rule "effect": "approve"`, at, f.name, effect, f.name)
			}
		}
		return nil, nil
	}
	if !hasApprovers {
		return nil, fmt.Errorf(`%s.approvers is missing: an "approve" rule names who may approve its calls, like "approvers": ["$caller", "lead_*"] ("$caller" is the session's own user; the others are user patterns)`, at)
	}
	a := &ApprovalRule{Timeout: DefaultApprovalTimeout}
	if err := json.Unmarshal(rawApprovers, &a.Approvers); err != nil || a.Approvers == nil {
		return nil, fmt.Errorf(`%s.approvers must be a list of user patterns, like ["$caller", "lead_*"], not %s`, at, clip(string(rawApprovers)))
	}
	if len(a.Approvers) == 0 {
		return nil, fmt.Errorf(`%s.approvers is an empty list, so no one could approve and every call would wait out its timeout: list at least one user pattern or "$caller", or make the rule "effect": "deny"`, at)
	}
	for i, pat := range a.Approvers {
		if pat == Caller {
			continue
		}
		if strings.HasPrefix(pat, "$") {
			return nil, fmt.Errorf(`%s.approvers[%d] %q: the only "$" name is "$caller" (the session's own user); for a user whose name starts with "$", write "\\$" in JSON, like "\\%s"`, at, i, pat, pat)
		}
		if _, err := glob.Compile(pat); err != nil {
			return nil, fmt.Errorf("%s.approvers[%d] %q: %w", at, i, pat, err)
		}
	}
	if hasTimeout {
		var s string
		if err := json.Unmarshal(rawTimeout, &s); err != nil {
			return nil, fmt.Errorf(`%s.timeout must be a duration string, like "timeout": "30m", not %s`, at, clip(string(rawTimeout)))
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf(`%s.timeout %q is not a duration: write a number with a unit, like "30m", "90s" or "2h"`, at, s)
		}
		if d < MinApprovalTimeout || d > MaxApprovalTimeout {
			return nil, fmt.Errorf(`%s.timeout %q: a call waits for approval from %v to %v; leave "timeout" out for %v`, at, s, MinApprovalTimeout, MaxApprovalTimeout, DefaultApprovalTimeout)
		}
		a.Timeout = d
	}
	return a, nil
}
