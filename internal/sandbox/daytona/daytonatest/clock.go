package daytonatest

import "time"

// SweepInterval is how often Daytona's lifecycle crons run (auto-stop-check,
// auto-archive-check and auto-delete-check are each @Cron(EVERY_10_SECONDS) in v0.190's
// apps/api/src/sandbox/managers/sandbox.manager.ts); Advance sweeps at this step.
const SweepInterval = 10 * time.Second

// clock is the emulator's time: the wall clock plus what Advance added, so that a test can
// let days pass in an instant. Sandbox state changes and activity are stamped with it.
// Guarded by Server.mu.
type clock struct {
	skew time.Duration
	// activity is each sandbox's last toolbox call (by sandbox id): the proxy reports
	// every toolbox request as activity (apps/proxy/pkg/proxy/get_sandbox_target.go,
	// updateLastActivity).
	activity map[string]time.Time
}

// now is the emulator's current time. Called with mu held.
func (s *Server) now() time.Time { return time.Now().Add(s.clk.skew).UTC() }

// Now is the emulator's current time: the wall clock plus every Advance so far.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now()
}

// Advance moves the emulator's clock forward by d and runs Daytona's lifecycle crons as
// they would have run meanwhile: a sweep (sweepLifecycle) every SweepInterval of the way
// and one at the end. It returns when the sweeps are done, so a test sees their effect at
// once and nothing happens between calls (the emulator has no background timer).
func (s *Server) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for d > 0 {
		step := min(d, SweepInterval)
		s.clk.skew += step
		d -= step
		s.sweepLifecycle()
	}
}

// touch records a toolbox call on sandbox id as activity. Called with mu held.
func (s *Server) touch(id string) {
	if s.clk.activity == nil {
		s.clk.activity = map[string]time.Time{}
	}
	s.clk.activity[id] = s.now()
}

// lastActivity is when sandbox sb was last active: its last toolbox call or its last
// state change, whichever is later (every update that changes the state upserts
// lastActivityAt: apps/api/src/sandbox/repositories/sandbox.repository.ts). The emulator
// changes UpdatedAt on state changes only. Called with mu held.
func (s *Server) lastActivity(sb *sbox) time.Time {
	t := sb.UpdatedAt
	if a, ok := s.clk.activity[sb.ID]; ok && a.After(t) {
		t = a
	}
	return t
}
