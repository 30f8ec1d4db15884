package daytonatest

import (
	"strings"
	"time"
)

// WithToolboxLatency makes every toolbox request wait d before it is handled: a round
// trip to a sandbox's daemon through Daytona's proxy, which the emulator, in process,
// otherwise answers in well under a millisecond. Benchmarks use it to see what a
// command costs when each request takes as long as it does against Daytona itself.
func WithToolboxLatency(d time.Duration) Option { return func(c *config) { c.toolboxLatency = d } }

// toolboxRoundTrip waits out WithToolboxLatency's delay.
func (s *Server) toolboxRoundTrip() {
	if d := s.cfg.toolboxLatency; d > 0 {
		time.Sleep(d)
	}
}

// WithRequestLatency makes every API request (the toolbox's have WithToolboxLatency) wait
// d before it is handled, outside the emulator's lock: Daytona's API round trip, so that
// a benchmark counts each lookup a call makes besides its commands.
func WithRequestLatency(d time.Duration) Option { return func(c *config) { c.requestLatency = d } }

// apiRoundTrip waits out WithRequestLatency's delay for a request under prefix.
func (s *Server) apiRoundTrip(prefix string) {
	if d := s.cfg.requestLatency; d > 0 && !strings.HasPrefix(prefix, "/toolbox") {
		time.Sleep(d)
	}
}
