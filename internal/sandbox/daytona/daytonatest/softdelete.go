package daytonatest

import (
	"net/http"
	"strconv"
	"time"
)

// softDeleteName is the name Daytona gives a deleted sandbox, which frees its own at once
// (Sandbox.getSoftDeleteName, v0.190 apps/api/src/sandbox/entities/sandbox.entity.ts:310-312).
func softDeleteName(name string, now time.Time) string {
	return "DESTROYED_" + name + "_" + strconv.FormatInt(now.UnixMilli(), 10)
}

// softDelete deletes a sandbox as Daytona does, by DELETE /sandbox/{id} or by the
// auto-delete crons. Called with mu held.
//
//   - The API's update (Sandbox.getSoftDeleteUpdate, v0.190 entities/sandbox.entity.ts:317-324;
//     destroy() in services/sandbox.service.ts:2013-2039, the crons in
//     managers/sandbox.manager.ts:144, :277) sets desiredState destroyed and renames the
//     sandbox DESTROYED_<name>_<ms>; its state is left alone.
//   - The manager's SandboxDestroyAction (managers/sandbox-actions/sandbox-destroy.action.ts:29-62)
//     then marks an archived sandbox destroyed at once, and otherwise has the runner destroy
//     the container (its processes and files go) and sets the state destroying until the
//     runner reports it destroyed: here WithTransitionDelay("destroying", d), default
//     WithLifecycleDelay's.
//   - Until then the sandbox is still read by id (findOneByIdOrName excludes only state
//     destroyed, services/sandbox.service.ts:1739-1786) and listed (listedSandbox).
//   - An errored one (error, build_failed) is gone at once: the manager's sync stops at an
//     error state (managers/sandbox.manager.ts:1029-1041), and GET and the list hide an
//     errored sandbox whose desiredState is destroyed (sandbox.service.ts:1777-1783,
//     adapters/sandbox-typeorm-search.adapter.ts:100-128).
func (s *Server) softDelete(sb *sbox) error {
	s.endSessions(sb.ID, false)
	if s.bx != nil {
		if err := s.bx.remove(sb.ID); err != nil {
			return err
		}
	}
	now := s.now()
	sb.DesiredState, sb.Name, sb.UpdatedAt = "destroyed", softDeleteName(sb.Name, now), now
	delete(s.clk.activity, sb.ID)
	switch sb.State {
	case "archived", "error", "build_failed":
		sb.State = "destroyed"
		s.destroy(sb)
		return nil
	}
	sb.State, sb.transitionEnd = "destroying", now.Add(s.transitionDelay("destroying"))
	s.advance(sb)
	return nil
}

// deleteSandbox is DELETE /sandbox/{id}: 409 while a state change is pending (destroy(),
// v0.190 services/sandbox.service.ts:2016-2018), else a soft delete, answered with the
// updated sandbox: renamed, desiredState destroyed, its state as it was (the API answers
// before the manager acts).
func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	sb := s.sandboxOr404(w, r)
	if sb == nil {
		return
	}
	if _, busy := transitions[sb.State]; busy {
		writeErr(w, r, 409, "Sandbox state change in progress")
		return
	}
	state := sb.State
	if err := s.softDelete(sb); err != nil {
		writeErr(w, r, 500, "daytonatest: "+err.Error())
		return
	}
	dto := sb.dto()
	dto["state"] = state
	writeJSON(w, 200, dto)
}

// listedSandbox is a sandbox as GET /sandbox lists it, a SandboxListItem (v0.190
// apps/api/src/sandbox/dto/sandbox-list-item.dto.ts; v0.205 adds the network fields):
// no env, an empty toolboxProxyUrl (:316), and the state derived from state and
// desiredState (deriveState, :319-352), so that a started sandbox being stopped lists as
// stopping and one being deleted as destroying.
func (sb *sbox) listedSandbox() map[string]any {
	d := sb.dto()
	delete(d, "env")
	d["toolboxProxyUrl"] = ""
	d["state"] = derivedState(sb.State, sb.DesiredState)
	return d
}

// derivedState is SandboxListItemDto.deriveState (v0.190 sandbox-list-item.dto.ts:319-352).
func derivedState(state, desired string) string {
	switch {
	case state == "started" && desired == "stopped":
		return "stopping"
	case state == "started" && desired == "destroyed", state == "stopped" && desired == "destroyed":
		return "destroying"
	case state == "stopped" && desired == "started":
		return "starting"
	case state == "stopped" && desired == "archived":
		return "archiving"
	case state == "archived" && desired == "started":
		return "restoring"
	case state == "unknown" && desired == "started":
		return "creating"
	}
	return state
}
