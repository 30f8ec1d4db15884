package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
)

// runCtx is run under ctx, for a turn cancelled as Ctrl-C cancels it.
func runCtx(t *testing.T, ctx context.Context, db string, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetIn(strings.NewReader(""))
	cmd.SetArgs(append([]string{"--database-url", db, "--owner", harnesstest.Owner}, args...))
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// Every documented exit status, from what the CLI returns (main exits with
// exitStatus of it).
func TestExitCodes(t *testing.T) {
	st := seed(t)
	readOutput := map[string]any{"tool_calls": []any{map[string]any{"name": "read_output", "arguments": map[string]any{"call_id": "none"}}}}
	harnesstest.AddAgent(t, st, "looper", "py", harnesstest.AgentSpec{"model": harnesstest.Script(readOutput, readOutput, readOutput)})
	harnesstest.AddAgent(t, st, "slow", "py", harnesstest.AgentSpec{"model": harnesstest.Script(map[string]any{"text": "late", "delay_ms": 30000})})
	const keyVar = "TF_HARNESS_TEST_UNSET_KEY"
	t.Setenv(keyVar, "")
	harnesstest.AddAgent(t, st, "keyless", "py", harnesstest.AgentSpec{"model": map[string]any{
		"provider": "openai", "name": "gpt-test", "base_url": "http://127.0.0.1:9/v1", "api_key_env": keyVar}})

	cases := []struct {
		name string
		code int
		args []string
		want string // in the error, when set
	}{
		{"ok", exitOK, []string{"run", "talker", "hi"}, ""},
		{"ok: list", exitOK, []string{"agents", "list", "-o", "json"}, ""},
		{"error: environment not Ready", exitError, []string{"run", "coder", "hi"}, "is Building, not Ready"},
		{"usage: unknown flag", exitUsage, []string{"sessions", "list", "--nope"}, "unknown flag"},
		{"usage: missing argument", exitUsage, []string{"run", "talker"}, "accepts 2 arg(s)"},
		{"usage: unknown command", exitUsage, []string{"sesions", "list"}, "unknown command"},
		{"usage: bad format", exitUsage, []string{"sessions", "list", "-o", "yaml"}, "table or json"},
		{"limit: max_turns", exitLimit, []string{"run", "looper", "go", "--max-turns", "2"}, ""},
		{"not found: agent", exitNotFound, []string{"run", "ghost", "hi"}, `agent "ghost" is not in the control-plane database`},
		{"not found: agents show", exitNotFound, []string{"agents", "show", "ghost"}, "agents list"},
		{"not found: session", exitNotFound, []string{"sessions", "show", "s-nope"}, ""},
		{"not found: --session", exitNotFound, []string{"run", "talker", "hi", "--session", "s-nope"}, "sessions list"},
		{"credential missing", exitCredential, []string{"run", "keyless", "hi"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, err := run(t, st.Path(), "", c.args...)
			if got := exitStatus(err); got != c.code {
				t.Fatalf("%v: exit status %d (%v); want %d\n%s%s", c.args, got, err, c.code, out, errOut)
			}
			if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("%v: error %v; want it to say %q", c.args, err, c.want)
			}
			if c.code == exitLimit && !strings.Contains(out, "limit reached: max_turns") {
				t.Fatalf("the limit is not printed:\n%s", out)
			}
			if c.code == exitCredential && !strings.Contains(out, keyVar) {
				t.Fatalf("the output does not name the variable:\n%s", out)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		out, err := runCtx(t, ctx, st.Path(), "run", "slow", "hi")
		if got := exitStatus(err); got != exitCancelled {
			t.Fatalf("exit status %d (%v); want %d\n%s", got, err, exitCancelled, out)
		}
	})
}
