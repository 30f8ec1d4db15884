package tools

import (
	"context"
	"fmt"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
)

// CodeApprovalTimeout is how long code held by an agent's sandbox.approve_code waits for
// the session's user.
const CodeApprovalTimeout = 10 * time.Minute

// CodeApprovals holds code for the session's user to read and approve before it runs
// (approvals.Gate).
type CodeApprovals interface {
	AwaitCode(ctx context.Context, o mcptools.Origin, user, agent, owner, tool, language, code string, timeout time.Duration) (mcptools.Verdict, error)
}

// ApproveCode holds code (a run_code script in language, or an exec command) for the
// session's user when the agent's sandbox.approve_code says so, before any sandbox is
// acquired: a refusal is a result, and nothing runs or is provisioned. ok is true when
// the code may run.
func (x *Executor) ApproveCode(ctx context.Context, c Call, tool, language, code string) (refusal Result, ok bool) {
	if c.Agent == nil || !c.Agent.Spec.Sandbox.ApproveCode {
		return Result{}, true
	}
	if x.Approvals == nil {
		return failed(tool + ": not run: the agent's sandbox.approve_code holds code for its user, and this harness has no approvals configured"), false
	}
	v, err := x.Approvals.AwaitCode(ctx, c.Origin(), c.User, c.Agent.Name, c.Agent.Owner, tool, language, code, CodeApprovalTimeout)
	switch {
	case err != nil:
		return failed(fmt.Sprintf("%s: not run: the approval the agent's sandbox.approve_code asks for could not be recorded: %v", tool, err)), false
	case !v.Approved:
		return failed(fmt.Sprintf("%s: not run: the session's user did not approve it (%s)", tool, mcptools.VerdictText(v))), false
	}
	return Result{}, true
}
