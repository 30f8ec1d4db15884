package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/api"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// usage reports what `run` spent, as a table and as JSON; it shows the caller's own by
// default, another user's with --user, everyone's with --all; a bad window is a usage
// error naming the flag.
func TestUsageCommand(t *testing.T) {
	st := seed(t)
	if _, _, err := run(t, st.Path(), "", "run", "talker", "hi"); err != nil {
		t.Fatal(err)
	}
	// Someone else's session, spending tokens the caller must not be shown by default.
	ctx := context.Background()
	if err := st.CreateSession(ctx, store.Session{ID: "other-s", Agent: "talker", Owner: "mallory"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendEvent(ctx, "other-s", "r", "usage", []byte(`{"step":{"input_tokens":5000,"output_tokens":1}}`)); err != nil {
		t.Fatal(err)
	}

	out, _, err := run(t, st.Path(), "", "usage")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Usage of tester from", "MODEL", "SANDBOX SECONDS", "MCP SERVER", "talker", "Total:"} {
		if !strings.Contains(out, s) {
			t.Errorf("usage table lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "mallory") || strings.Contains(out, "5000") {
		t.Errorf("the caller's usage shows another user's:\n%s", out)
	}

	report := func(args ...string) api.UsageReport {
		t.Helper()
		out, _, err := run(t, st.Path(), "", append([]string{"usage", "-o", "json"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var r api.UsageReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("usage -o json: %v\n%s", err, out)
		}
		return r
	}
	mine := report()
	var raw map[string]any
	out, _, err = run(t, st.Path(), "", "usage", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &raw) != nil {
		t.Fatalf("usage -o json: %v\n%s", err, out)
	}
	checkFields(t, "usage -o json", raw, []string{"from", "to", "user", "agent", "tokens", "sandboxes", "mcp", "totals"})
	checkFields(t, "a tokens row", raw["tokens"].([]any)[0].(map[string]any), []string{"agent", "user", "model", "input_tokens", "output_tokens", "steps"})
	checkFields(t, "usage totals", raw["totals"].(map[string]any), []string{"input_tokens", "output_tokens", "sandbox_seconds", "mcp_calls"})
	if len(mine.Tokens) != 1 || mine.Tokens[0].User != "tester" || mine.Tokens[0].Agent != "talker" || mine.Totals.InputTokens == 0 {
		t.Errorf("own usage: %+v", mine)
	}
	if r := report("--user", "mallory"); len(r.Tokens) != 1 || r.Tokens[0].InputTokens != 5000 {
		t.Errorf("--user mallory: %+v", r.Tokens)
	}
	if r := report("--all"); len(r.Tokens) != 2 || r.Totals.InputTokens != mine.Totals.InputTokens+5000 {
		t.Errorf("--all: %+v", r.Tokens)
	}
	if r := report("--agent", "coder"); len(r.Tokens) != 0 {
		t.Errorf("--agent coder: %+v", r.Tokens)
	}
	if r := report("--since", "2020-01-01", "--until", "2020-01-08"); len(r.Tokens) != 0 {
		t.Errorf("a window in 2020: %+v", r.Tokens)
	}

	for _, c := range []struct {
		args      []string
		flag, fix string
	}{
		{[]string{"--window", "fortnight"}, "--window", "7d"},
		{[]string{"--window", "100d"}, "--window", "at most 93d"},
		{[]string{"--since", "last week"}, "--since", "RFC 3339"},
		{[]string{"--since", "2026-01-01", "--window", "1d"}, "--window", "not both"},
	} {
		_, _, err := run(t, st.Path(), "", append([]string{"usage"}, c.args...)...)
		if err == nil || exitStatus(err) != exitUsage || !strings.Contains(err.Error(), c.flag) || !strings.Contains(err.Error(), c.fix) {
			t.Errorf("usage %v: %v (exit %d); want a usage error naming %s and %q", c.args, err, exitStatus(err), c.flag, c.fix)
		}
	}
	if _, _, err := run(t, st.Path(), "", "usage", "--user", "x", "--all"); err == nil || exitStatus(err) != exitUsage {
		t.Errorf("--user with --all: %v", err)
	}
}
