package agentspec

import (
	"strings"
	"testing"
)

// CheckBounds names the field, the bound and the fix; a spec within every bound, the
// defaults included, passes.
func TestCheckBounds(t *testing.T) {
	ok := Default("a")
	if err := ok.CheckBounds(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	edge := Default("a")
	edge.MaxTurns, edge.TokenBudget = MaxMaxTurns, MinTokenBudget
	edge.CodeModeLimits = &CodeModeLimits{CallTimeoutSeconds: MaxCodeCallTimeoutSeconds, RunTimeoutSeconds: 1, MaxCalls: MaxCodeMaxCalls, MaxResultBytes: MinCodeMaxResultBytes}
	if err := edge.CheckBounds(); err != nil {
		t.Fatalf("at the bounds: %v", err)
	}
	for _, c := range []struct {
		set  func(*Spec)
		want []string
	}{
		{func(s *Spec) { s.MaxTurns = 5000 }, []string{"max_turns is 5000", "1 to 1000", "apply the agent again with max_turns"}},
		{func(s *Spec) { s.TokenBudget = 10 }, []string{"token_budget is 10", "1000 to 100000000"}},
		{func(s *Spec) { s.TokenBudget = MaxTokenBudget + 1 }, []string{"token_budget is 100000001"}},
		{func(s *Spec) { s.CodeModeLimits = &CodeModeLimits{MaxCalls: MaxCodeMaxCalls + 1} }, []string{"code_mode_limits.max_calls is 10001"}},
		{func(s *Spec) { s.CodeModeLimits = &CodeModeLimits{MaxResultBytes: 10} }, []string{"code_mode_limits.max_result_bytes is 10", "1024 to"}},
		{func(s *Spec) { s.CodeModeLimits = &CodeModeLimits{RunTimeoutSeconds: 86400} }, []string{"code_mode_limits.run_timeout_seconds is 86400"}},
		{func(s *Spec) { s.CodeModeLimits = &CodeModeLimits{CallTimeoutSeconds: 601} }, []string{"code_mode_limits.call_timeout_seconds is 601"}},
		{func(s *Spec) { s.Skills = make([]Skill, 33) }, []string{"skills (how many) is 33", "0 to 32"}},
		{func(s *Spec) { s.Skills = []Skill{{Name: "big", Description: strings.Repeat("x", 1025)}} }, []string{"skills[0] (big)", "1025 characters"}},
		{func(s *Spec) { s.Sandbox.ExtractLimits = &ExtractLimits{MaxEntries: MaxExtractMaxEntries + 1} },
			[]string{"sandbox.extract_limits.max_entries is 1000001", "1 to 1000000", "apply the agent again with sandbox.extract_limits.max_entries"}},
		{func(s *Spec) { s.Sandbox.ExtractLimits = &ExtractLimits{MaxRatio: MaxExtractMaxRatio + 1} }, []string{"sandbox.extract_limits.max_ratio is 100001"}},
		{func(s *Spec) { s.Sandbox.ExtractLimits = &ExtractLimits{MaxBytes: MaxExtractMaxBytes + 1} }, []string{"sandbox.extract_limits.max_bytes is 68719476737"}},
		{func(s *Spec) { s.Sandbox.IdleStopMinutes, s.Sandbox.ArchiveAfterMinutes = 100, 10 }, []string{"idle_stop_minutes 100, archive_after_minutes 10", "apply the agent again"}},
	} {
		s := Default("a")
		c.set(&s)
		err := s.CheckBounds()
		if err == nil {
			t.Errorf("%v passed; want %q", c.want, c.want[0])
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
	}
	// A stored spec reads its zero limits as defaults (Decode), which are within bounds.
	s, err := Decode([]byte(`{"name":"a","max_turns":0,"token_budget":-1,"code_mode_limits":{"max_calls":0}}`))
	if err != nil || s.CheckBounds() != nil {
		t.Fatalf("zeros decoded: %v %v", err, s.CheckBounds())
	}
}
