package runner_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/approvals"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// An agent with sandbox.approve_code holds each command for the session's user, who
// reads the code in the approval: approved, it runs in the sandbox; denied with a note,
// it does not run, no sandbox is provisioned for it, and the model is told why. Nobody
// else may decide it.
func TestApproveCodeHoldsCommandsForTheUser(t *testing.T) {
	for _, approve := range []bool{true, false} {
		name := map[bool]string{true: "approved", false: "denied"}[approve]
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			sb := harnesstest.Sandbox("default", 15, 60, 120)
			sb["approve_code"] = true
			harnesstest.AddAgent(t, f.env.Store, "careful", "default", harnesstest.AgentSpec{
				"model":   harnesstest.Script(exec("echo held-then-run"), text("done")),
				"sandbox": sb,
			})
			gate := &approvals.Gate{Store: f.env.Store, Poll: 20 * time.Millisecond}
			r := f.runnerWith(t, "careful", &tools.Executor{Store: f.env.Store, Sandboxes: f.manager, Now: f.clock.Now, Approvals: gate})
			sid := ownerSession(t, r)
			decided := make(chan error, 1)
			go func() {
				a, err := pendingOf(f.env.Store, harnesstest.Owner, sid)
				if err == nil {
					if a.Kind != store.ApprovalKindCode || a.Code != "echo held-then-run" || a.Tool != "exec" || a.Language != "shell" {
						t.Errorf("the approval shows %+v", a)
					}
					if _, err := approvals.Decide(context.Background(), f.env.Store, a.ID, "mallory", true, "", time.Now()); err == nil {
						t.Error("a user who is not the session's approved its code")
					}
					if n := f.env.Runtime.Total(); n != 0 {
						t.Errorf("%d sandbox calls before the code was approved", n)
					}
					_, err = approvals.Decide(context.Background(), f.env.Store, a.ID, harnesstest.Owner, approve, "not today", time.Now())
				}
				decided <- err
			}()
			mustRun(t, r, sid, "run it")
			if err := <-decided; err != nil {
				t.Fatal(err)
			}
			res := results(t, f.env.Store, sid)
			if len(res) != 1 {
				t.Fatalf("results %v", res)
			}
			text, _ := res[0]["text"].(string)
			if approve {
				if !strings.Contains(text, "held-then-run") || res[0]["is_error"] == true {
					t.Fatalf("approved command's result %q", text)
				}
			} else {
				if !strings.Contains(text, "not run") || !strings.Contains(text, "not today") || res[0]["is_error"] != true {
					t.Fatalf("denied command's result %q", text)
				}
				if n := f.env.Runtime.Total(); n != 0 {
					t.Fatalf("a denied command made %d sandbox calls", n)
				}
			}
			inOrder(t, f.env.Store, sid, events.KindToolCall, events.KindApprovalRequested, events.KindApprovalDecided, events.KindToolResult)
		})
	}
}
