package runner_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/everythingtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/approvals"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// The harness as the MCP client of a server it did not write: the reference server of
// the MCP project (@modelcontextprotocol/server-everything, from npm, over streamable
// HTTP). Its trigger tools send the requests real servers send: an elicitation the
// session's user answers or declines, progress of a long operation, and a sampling
// request the harness refuses by default.
func TestAgainstServerEverything(t *testing.T) {
	url := everythingtest.Start(t)
	ctx := context.Background()
	setup := func(t *testing.T, tool string, args map[string]any) (*store.Store, *runner.Runner, string) {
		st, _ := twoHandles(t)
		harnesstest.AddAgent(t, st, "everything", "default", harnesstest.AgentSpec{
			"model":       harnesstest.Script(call("everything__"+tool, args), text("done")),
			"mcp_servers": []any{map[string]any{"name": "everything", "url": url}},
		})
		r := asking(t, st, "everything", "alice", loadPolicy(t, `{"rules": [{"effect": "allow"}], "default": "deny"}`), nil)
		sid, err := r.NewSession(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		return st, r, sid
	}
	resultText := func(t *testing.T, st *store.Store, sid string) string {
		t.Helper()
		res := results(t, st, sid)
		if len(res) != 1 {
			t.Fatalf("results %v", res)
		}
		s, _ := res[0]["text"].(string)
		return s
	}

	t.Run("elicitation answered", func(t *testing.T) {
		st, r, sid := setup(t, "trigger-elicitation-request", map[string]any{})
		done := make(chan error, 1)
		go func() {
			a, err := pendingOf(st, "alice", sid)
			if err == nil {
				if _, bad := approvals.Answer(ctx, st, a.ID, "alice", map[string]any{"integer": 500}, time.Now()); bad == nil {
					t.Error("an answer without the required name, and an integer over its maximum, was accepted")
				}
				_, err = approvals.Answer(ctx, st, a.ID, "alice", map[string]any{"name": "Ada Lovelace", "check": true, "integer": 7}, time.Now())
			}
			done <- err
		}()
		mustRun(t, r, sid, "ask me")
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := resultText(t, st, sid)
		if !strings.Contains(got, "User provided the requested information") || !strings.Contains(got, "Name: Ada Lovelace") || !strings.Contains(got, "Favorite Integer: 7") {
			t.Fatalf("the server's answer: %q", got)
		}
	})

	t.Run("elicitation declined", func(t *testing.T) {
		st, r, sid := setup(t, "trigger-elicitation-request", map[string]any{})
		done := make(chan error, 1)
		go func() {
			a, err := pendingOf(st, "alice", sid)
			if err == nil {
				_, err = approvals.Decide(ctx, st, a.ID, "alice", false, "", time.Now())
			}
			done <- err
		}()
		mustRun(t, r, sid, "ask me")
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := resultText(t, st, sid); !strings.Contains(got, "User declined") {
			t.Fatalf("the server's answer: %q", got)
		}
	})

	t.Run("progress of a long operation", func(t *testing.T) {
		st, r, sid := setup(t, "trigger-long-running-operation", map[string]any{"duration": 1.5, "steps": 3})
		var mu sync.Mutex
		var progress []string
		if _, err := r.Run(ctx, sid, "run long", func(e runner.Event) {
			if e.Partial && e.Stream == "progress" {
				mu.Lock()
				progress = append(progress, e.Delta)
				mu.Unlock()
			}
		}); err != nil {
			t.Fatal(err)
		}
		if got := resultText(t, st, sid); !strings.Contains(got, "Long running operation completed") {
			t.Fatalf("result %q", got)
		}
		mu.Lock()
		defer mu.Unlock()
		// The last notification may be handled after the call's answer (the client
		// handles notifications beside responses): the first two come while it runs.
		if len(progress) < 2 || !strings.HasPrefix(progress[0], "everything__trigger-long-running-operation: 1/3") {
			t.Fatalf("progress %q", progress)
		}
	})

	t.Run("sampling refused by default", func(t *testing.T) {
		st, r, sid := setup(t, "trigger-sampling-request", map[string]any{"prompt": "Say hi", "maxTokens": 20})
		mustRun(t, r, sid, "sample")
		got := resultText(t, st, sid)
		if !strings.Contains(got, "sampling refused") || !strings.Contains(got, `"sampling" list`) {
			t.Fatalf("the server's answer: %q", got)
		}
	})
}
