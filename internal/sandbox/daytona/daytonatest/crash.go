package daytonatest

// KillContainer kills a started sandbox's container out of band, as the kernel's OOM
// killer, a crash of the daemon (the container's entrypoint,
// apps/runner/pkg/docker/container_configs.go:143-165 in v0.190) or a restart of the
// runner's Docker daemon does, and reports the sandbox as Daytona then does. It returns
// false if there is no started sandbox idOrName.
//
//   - Its processes, the daemon and its sessions are gone; its files stay (the
//     container's filesystem outlives it). Nothing starts it again: the runner gives its
//     containers no restart policy (container_configs.go getContainerHostConfig, :180).
//   - The runner reads an exited container with code 0, 137 (SIGKILL), 143 (SIGTERM) or
//     255 as stopped (apps/runner/pkg/docker/state.go:58-62; other codes are error, not
//     emulated), and its state sync, every 10 s (apps/runner/cmd/runner/main.go:198-202),
//     reports that for each sandbox the API has started (apps/runner/pkg/services/
//     sandbox_sync.go:76-80, :106-135). The API's updateState (apps/api/src/sandbox/
//     services/sandbox.service.ts:3136-3196, "when a sandbox instance stops or errors on the runner") then sets state stopped and desiredState
//     stopped (getExpectedDesiredStateForState, :1690-1704), so that no cron starts it
//     again and GET /sandbox/{id} reads stopped, as after a stop.
//
// The emulator reports the new state at once; on Daytona, for up to the sync's 10 s, the
// API still says started while the toolbox cannot reach the daemon.
func (s *Server) KillContainer(idOrName string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.findSandbox(idOrName)
	if sb == nil || sb.State != "started" {
		return false
	}
	s.endSessions(sb.ID, false)
	if s.bx != nil {
		if err := s.bx.stop(sb.ID); err != nil {
			sb.State, sb.errorReason, sb.UpdatedAt = "error", "daytonatest: killing the container: "+err.Error(), s.now()
			return true
		}
	}
	sb.State, sb.DesiredState, sb.UpdatedAt = "stopped", "stopped", s.now()
	return true
}
