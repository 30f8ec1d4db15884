package daytona

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// Daytona's limits on a sandbox's lifecycle intervals and CIDR allow list, from v0.190's
// apps/api/src/sandbox/services/sandbox.service.ts (resolveAutoArchiveInterval caps at
// maxAutoArchiveInterval, MAX_AUTO_ARCHIVE_INTERVAL, default 43200 minutes in
// apps/api/src/config/configuration.ts) and apps/api/src/sandbox/utils/
// network-validation.util.ts (validateNetworkAllowList: IPv4 CIDRs only, at most 10).
const (
	MaxAutoArchive = 43200 // minutes: 30 days
	MaxCIDRs       = 10
)

// lifecycleIntervals are a sandbox's autoStopInterval, autoArchiveInterval and
// autoDeleteInterval (minutes) for an agent's timings l, the runtime's configured values
// (nil: the Default* ones) standing in for any timing l leaves at zero.
//
// What Daytona does with them (v0.190's apps/api/src/sandbox/managers/sandbox.manager.ts,
// autostopCheck, autoArchiveCheck and autoDeleteCheck, each a cron every 10 s): a started
// sandbox whose last activity is older than autoStopInterval is stopped (0: never); a
// stopped one older than autoArchiveInterval is archived; a stopped one older than
// autoDeleteInterval is deleted (negative: never). Last activity is reset by toolbox calls
// and by every state change (sandbox.repository.ts, upsertLastActivity), so the archive
// and delete intervals count from the stop, which is what l's ArchiveAfter and
// DeleteAfter are. An archived sandbox is never deleted by Daytona (autoDeleteCheck selects
// state 'stopped' only): to keep the agent's promise that idle sandboxes are deleted
// with no harness running, a sandbox with a delete timing under MaxAutoArchive gets
// autoArchiveInterval 0 (Daytona's maximum, 30 days), so it is deleted while still
// stopped and never archived by Daytona; the harness's reaper, when it runs, archives it
// on the agent's timing as before. A delete timing of MaxAutoArchive minutes or more
// cannot be kept by Daytona (it archives at 30 days and stops there): the agent's archive
// timing is sent and the reaper deletes.
//
// Each timing is rounded up to a whole minute, and at least 1: Daytona's intervals are
// whole minutes, and 0 means something else for each of them.
func (r *Runtime) lifecycleIntervals(l sandbox.Lifecycle) (stop, archive, del *int) {
	stop = orDefault(r.AutoStop, DefaultAutoStop)
	archive = orDefault(r.AutoArchive, DefaultAutoArchive)
	del = orDefault(r.AutoDelete, DefaultAutoDelete)
	if l.IdleStop > 0 {
		stop = ceilMinutes(l.IdleStop)
	}
	if l.ArchiveAfter > 0 {
		archive = ceilMinutes(l.ArchiveAfter)
	}
	switch {
	case l.DeleteAfter > 0:
		del = ceilMinutes(l.DeleteAfter)
	case l.DeleteAfter < 0:
		never := -1
		del = &never
	}
	if l.DeleteOnStop {
		// Ephemeral: deleted as it stops ("0 = delete immediately when stopped"), which
		// Daytona requires of GPU sandboxes.
		zero := 0
		del = &zero
	}
	if *del >= 0 && *del < MaxAutoArchive {
		// Deleted before Daytona would archive it (see above); 0 is the maximum.
		zero := 0
		archive = &zero
	}
	return stop, archive, del
}

// ceilMinutes is d in whole minutes, rounded up, at least 1.
func ceilMinutes(d time.Duration) *int {
	m := max(int((d+time.Minute-1)/time.Minute), 1)
	return &m
}

// applySettings puts the request's live settings on a sandbox's create body: the
// lifecycle intervals of the agent's timings, and the CIDRs the sandbox may reach as
// networkAllowList. CIDRs that Daytona would refuse are refused here, naming the entry.
func (r *Runtime) applySettings(cr *CreateSandboxRequest, req sandbox.CreateRequest) error {
	cr.AutoStopInterval, cr.AutoArchiveInterval, cr.AutoDeleteInterval = r.lifecycleIntervals(req.Lifecycle)
	if req.BlockNetwork || len(req.AllowCIDRs) == 0 {
		return nil
	}
	list, err := networkAllowList(req.AllowCIDRs)
	if err != nil {
		return err
	}
	cr.NetworkAllowList = list
	return nil
}

// networkAllowList is Daytona's networkAllowList for cidrs: comma-separated IPv4 CIDRs,
// at most MaxCIDRs, each with its prefix length.
func networkAllowList(cidrs []string) (string, error) {
	if len(cidrs) > MaxCIDRs {
		return "", fmt.Errorf("%d CIDRs; Daytona's networkAllowList takes at most %d", len(cidrs), MaxCIDRs)
	}
	out := make([]string, 0, len(cidrs))
	for _, c := range cidrs {
		if msg := cidrProblem(c); msg != "" {
			return "", fmt.Errorf("networkAllowList: %s", msg)
		}
		out = append(out, strings.TrimSpace(c))
	}
	return strings.Join(out, ","), nil
}

// cidrProblem says why Daytona refuses c as a networkAllowList entry ("" when it takes it).
func cidrProblem(c string) string {
	p, err := netip.ParsePrefix(strings.TrimSpace(c))
	switch {
	case err != nil:
		return fmt.Sprintf("%q is not a CIDR such as 203.0.113.0/24 (an address and a prefix length)", c)
	case !p.Addr().Is4():
		return fmt.Sprintf("%q is an IPv6 range; Daytona's networkAllowList takes IPv4 CIDRs only", c)
	}
	return ""
}

// checkCIDRs is CheckEnvironment's part for network.allow_cidrs: what Daytona would refuse
// at sandbox creation (more than MaxCIDRs entries, IPv6 ranges, entries without a prefix
// length) is refused at plan time instead.
func checkCIDRs(env sandbox.EnvironmentSpec) []sandbox.Problem {
	var problems []sandbox.Problem
	if len(env.AllowCIDRs) > MaxCIDRs {
		problems = append(problems, sandbox.Problem{Attribute: "network.allow_cidrs", Summary: "Too Many Allowed CIDRs For Daytona",
			Detail: fmt.Sprintf("network.allow_cidrs has %d entries; Daytona's networkAllowList takes at most %d. Merge neighbouring ranges into wider ones, or name hosts in network.allow_domains instead.",
				len(env.AllowCIDRs), MaxCIDRs)})
	}
	for _, c := range env.AllowCIDRs {
		if msg := cidrProblem(c); msg != "" {
			problems = append(problems, sandbox.Problem{Attribute: "network.allow_cidrs", Summary: "CIDR Not Supported By Daytona",
				Detail: fmt.Sprintf("network.allow_cidrs: %s. Change or remove the entry.", msg)})
		}
	}
	return problems
}
