package agentspec

import (
	"fmt"
	"unicode/utf8"

	"github.com/trueforge/terraform-provider-trueforge/internal/skills"
)

// MinCodeMaxResultBytes is the least code_mode_limits.max_result_bytes: less would not
// hold one small result.
const MinCodeMaxResultBytes = 1024

// A Bound is the range of one numeric attribute of an agent, named as the configuration
// names it.
type Bound struct {
	Field    string
	Min, Max int64
	value    func(Spec) int64
}

// Bounds are the ranges the provider's schema enforces on an agent's limits, from the
// same constants, and that CheckBounds checks on a spec read from the store.
func Bounds() []Bound {
	return []Bound{
		{"max_turns", 1, MaxMaxTurns, func(s Spec) int64 { return s.MaxTurns }},
		{"token_budget", MinTokenBudget, MaxTokenBudget, func(s Spec) int64 { return s.TokenBudget }},
		{"code_mode_limits.call_timeout_seconds", 1, MaxCodeCallTimeoutSeconds, func(s Spec) int64 { return s.CodeLimits().CallTimeoutSeconds }},
		{"code_mode_limits.run_timeout_seconds", 1, MaxCodeRunTimeoutSeconds, func(s Spec) int64 { return s.CodeLimits().RunTimeoutSeconds }},
		{"code_mode_limits.max_calls", 1, MaxCodeMaxCalls, func(s Spec) int64 { return s.CodeLimits().MaxCalls }},
		{"code_mode_limits.max_result_bytes", MinCodeMaxResultBytes, MaxCodeMaxResultBytes, func(s Spec) int64 { return s.CodeLimits().MaxResultBytes }},
		{"skills (how many)", 0, skills.MaxPerAgent, func(s Spec) int64 { return int64(len(s.Skills)) }},
		{"sandbox.extract_limits.max_entries", 1, MaxExtractMaxEntries, func(s Spec) int64 { return s.Sandbox.Extract().MaxEntries }},
		{"sandbox.extract_limits.max_bytes", 1, MaxExtractMaxBytes, func(s Spec) int64 { return s.Sandbox.Extract().MaxBytes }},
		{"sandbox.extract_limits.max_ratio", 1, MaxExtractMaxRatio, func(s Spec) int64 { return s.Sandbox.Extract().MaxRatio }},
	}
}

// CheckBounds reports the first limit of s outside what the provider accepts: its
// Bounds, the order of the sandbox timings, and the length of each skill's description.
// The provider checks the spec it is about to store with it, and the harness every spec
// it reads before anything runs: a row written past terraform (by psql, or by an older
// or other writer) must not buy an agent more than a configuration can, such as 5000
// model steps for one message. The error names the field, the bound and the fix.
func (s Spec) CheckBounds() error {
	for _, b := range Bounds() {
		if v := b.value(s); v < b.Min || v > b.Max {
			return fmt.Errorf("%s is %d, outside the %d to %d that trueforge_agent accepts; apply the agent again with %s within it",
				b.Field, v, b.Min, b.Max, b.Field)
		}
	}
	sb := s.Sandbox
	if sb.IdleStopMinutes < 1 || sb.ArchiveAfterMinutes < sb.IdleStopMinutes || sb.DeleteAfterMinutes < sb.ArchiveAfterMinutes {
		return fmt.Errorf("sandbox timings are idle_stop_minutes %d, archive_after_minutes %d, delete_after_minutes %d; trueforge_agent accepts "+
			"1 <= idle_stop_minutes <= archive_after_minutes <= delete_after_minutes: apply the agent again with timings in that order",
			sb.IdleStopMinutes, sb.ArchiveAfterMinutes, sb.DeleteAfterMinutes)
	}
	for i, k := range s.Skills {
		if n := utf8.RuneCountInString(k.Description); n > skills.MaxDescriptionChars {
			return fmt.Errorf("skills[%d] (%s) has a description of %d characters, over the %d a SKILL.md may have; apply the agent again (the provider reads the description from the skill's folder)",
				i, k.Name, n, skills.MaxDescriptionChars)
		}
	}
	return nil
}
