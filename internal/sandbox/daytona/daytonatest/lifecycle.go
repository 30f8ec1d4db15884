package daytonatest

import (
	"slices"
	"time"
)

// sweepLifecycle is one run of Daytona's lifecycle crons over every sandbox, as v0.190's
// apps/api/src/sandbox/managers/sandbox.manager.ts runs them (autostopCheck,
// autoArchiveCheck, autoDeleteCheck), each on a sandbox that is not changing state
// (state equal to desired state) and whose last activity (lastActivity) is older than its
// interval, in minutes:
//
//   - started, autoStopInterval not 0: stopped; an ephemeral sandbox (autoDeleteInterval 0)
//     is deleted instead (isEphemeral, getSoftDeleteUpdate).
//   - stopped, autoDeleteInterval >= 0: deleted. Only a stopped sandbox: an archived one
//     is never deleted automatically.
//   - stopped: archived after autoArchiveInterval (resolved at creation: 0 is the
//     maximum, 30 days).
//
// Daytona runs the three as separate crons, so when both the archive and the delete of a
// stopped sandbox are due, either may come first; the emulator deletes. Called with mu held.
func (s *Server) sweepLifecycle() {
	s.advanceSandboxes()
	now := s.now()
	for _, sb := range slices.Clone(s.sandboxes) {
		idle := now.Sub(s.lastActivity(sb))
		switch {
		case sb.State == "started" && sb.DesiredState == "started" && sb.AutoStop != 0 && idle > minutes(sb.AutoStop):
			if sb.AutoDelete == 0 {
				s.autoDestroy(sb)
				continue
			}
			s.autoTransition(sb, "stopping")
		case sb.State == "stopped" && sb.DesiredState == "stopped" && sb.AutoDelete >= 0 && idle > minutes(sb.AutoDelete):
			s.autoDestroy(sb)
		case sb.State == "stopped" && sb.DesiredState == "stopped" && idle > minutes(sb.AutoArchive):
			s.autoTransition(sb, "archiving")
		}
	}
}

func minutes(n int) time.Duration { return time.Duration(n) * time.Minute }

// autoTransition begins a cron's state change (via is "stopping" or "archiving") as a
// lifecycle call would, and completes it when its delay is 0. Called with mu held.
func (s *Server) autoTransition(sb *sbox, via string) {
	if sb.State == "started" {
		// The daemon does not outlive a stop: its sessions and their commands end.
		s.endSessions(sb.ID, false)
		if s.bx != nil {
			if err := s.bx.stop(sb.ID); err != nil {
				sb.State, sb.DesiredState, sb.errorReason, sb.UpdatedAt = "error", "stopped", "daytonatest: auto-stop: "+err.Error(), s.now()
				return
			}
		}
	}
	sb.State, sb.DesiredState = via, transitions[via]
	sb.transitionEnd, sb.UpdatedAt = s.now().Add(s.transitionDelay(via)), s.now()
	s.advance(sb)
}

// autoDestroy deletes a sandbox as the crons do: a soft delete (softdelete.go), then
// destroying until destroyed. A box that cannot be removed leaves the sandbox in error.
// Called with mu held.
func (s *Server) autoDestroy(sb *sbox) {
	if err := s.softDelete(sb); err != nil {
		sb.State, sb.errorReason, sb.UpdatedAt = "error", "daytonatest: auto-delete: "+err.Error(), s.now()
	}
}
