package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// usageT0 is the start of the usage tests' window, which is three hours long.
var usageT0 = time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)

// appendAt appends an event to session as if at usageT0+d.
func (st *Store) appendAt(t *testing.T, session string, d time.Duration, kind, payload string) {
	t.Helper()
	st.now = func() time.Time { return usageT0.Add(d) }
	if _, err := st.AppendEvent(context.Background(), session, "r1", kind, []byte(payload)); err != nil {
		t.Fatal(err)
	}
}

// seedUsage records three users' worth of model steps, MCP calls and sandbox runs, some
// before the window, and leaves the clock long after it.
func seedUsage(t *testing.T, st *Store) {
	t.Helper()
	ctx := context.Background()
	for _, s := range []Session{{ID: "s1", Agent: "helper", Owner: "alice"}, {ID: "s2", Agent: "helper", Owner: "bob"},
		{ID: "s3", Agent: "other", Owner: "alice"}, {ID: "s4", Agent: "helper", Owner: "alice"}} {
		must(t, st.CreateSession(ctx, s))
	}
	h := time.Hour
	step := func(session string, d time.Duration, model string, in, out int) {
		st.appendAt(t, session, d, "model_message", fmt.Sprintf(`{"text":"secret prompt","model":%q}`, model))
		st.appendAt(t, session, d, "usage", fmt.Sprintf(`{"step":{"input_tokens":%d,"output_tokens":%d},"budget":1000}`, in, out))
	}
	step("s1", -h, "claude-x", 1000, 1000) // before the window
	step("s1", h, "claude-x", 100, 10)
	step("s1", 2*h, "gpt-y", 50, 5)
	step("s1", 2*h+time.Minute, "claude-x", 1, 1)
	step("s2", h, "claude-x", 7, 3)
	step("s3", 3*h, "claude-x", 9, 9) // at the window's end: outside

	mcp := func(session string, d time.Duration, payload string) { st.appendAt(t, session, d, "mcp_call", payload) }
	mcp("s1", h, `{"tool":"weather__forecast","outcome":"completed"}`)
	mcp("s1", h, `{"tool":"weather__forecast","outcome":"completed","is_error":true}`)
	mcp("s1", h, `{"tool":"weather__alerts","outcome":"unknown"}`)
	mcp("s1", h, `{"tool":"weather__alerts","outcome":"completed","late":true}`) // the same call again
	mcp("s1", h, `{"tool":"db__query","outcome":"denied"}`)
	mcp("s2", h, `{"tool":"db__query","outcome":"limit"}`)

	box := func(session, env, state string, stateAt time.Duration) {
		must(t, st.PutSessionSandbox(ctx, SessionSandbox{SessionID: session, Provider: "local", ProviderType: "local", SandboxID: "box-" + session,
			Environment: env, SnapshotID: "snap", State: state, Generation: 1, CreatedAt: usageT0, LastUsedAt: usageT0, StateAt: usageT0.Add(stateAt)}))
	}
	// s1: running from before the window until 1h in, then again from 2h on (now).
	st.appendAt(t, "s1", -2*h, "sandbox_provisioned", `{"sandbox_id":"box-s1","environment":"py"}`)
	st.appendAt(t, "s1", h, "sandbox_stopped", `{"sandbox_id":"box-s1","from":"running"}`)
	st.appendAt(t, "s1", h+time.Minute, "sandbox_archived", `{"sandbox_id":"box-s1","from":"stopped"}`)
	st.appendAt(t, "s1", 2*h, "sandbox_resumed", `{"sandbox_id":"box-s1"}`)
	box("s1", "py", SandboxStateRunning, 2*h)
	// s2: 15 minutes, ended by a loss.
	st.appendAt(t, "s2", 30*time.Minute, "sandbox_provisioned", `{"sandbox_id":"box-s2","environment":"py"}`)
	st.appendAt(t, "s2", 45*time.Minute, "sandbox_lost", `{"sandbox_id":"box-s2","state":"running"}`)
	box("s2", "py", SandboxStateLost, 45*time.Minute)
	// s3: running since long before the window, with no event in it.
	st.appendAt(t, "s3", -5*h, "sandbox_provisioned", `{"sandbox_id":"box-s3","environment":"big"}`)
	box("s3", "big", SandboxStateRunning, -5*h)
	// s4: ran and stopped before the window.
	st.appendAt(t, "s4", -5*h, "sandbox_provisioned", `{"sandbox_id":"box-s4","environment":"py"}`)
	st.appendAt(t, "s4", -4*h, "sandbox_stopped", `{"sandbox_id":"box-s4","from":"running"}`)
	box("s4", "py", SandboxStateStopped, -4*h)

	st.now = func() time.Time { return usageT0.Add(10 * h) }
}

func TestUsageOverAWindow(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		seedUsage(t, st)
		ctx := context.Background()
		win := UsageFilter{From: usageT0, To: usageT0.Add(3 * time.Hour)}
		u, err := st.Usage(ctx, win)
		must(t, err)
		wantTokens := []TokenUsage{
			{Agent: "helper", User: "alice", Model: "claude-x", InputTokens: 101, OutputTokens: 11, Steps: 2},
			{Agent: "helper", User: "alice", Model: "gpt-y", InputTokens: 50, OutputTokens: 5, Steps: 1},
			{Agent: "helper", User: "bob", Model: "claude-x", InputTokens: 7, OutputTokens: 3, Steps: 1},
		}
		if !reflect.DeepEqual(u.Tokens, wantTokens) {
			t.Errorf("tokens:\n got %+v\nwant %+v", u.Tokens, wantTokens)
		}
		wantBoxes := []SandboxUsage{
			{Agent: "helper", User: "alice", Environment: "py", Running: 2 * time.Hour},
			{Agent: "helper", User: "bob", Environment: "py", Running: 15 * time.Minute},
			{Agent: "other", User: "alice", Environment: "big", Running: 3 * time.Hour},
		}
		if !reflect.DeepEqual(u.Sandboxes, wantBoxes) {
			t.Errorf("sandboxes:\n got %+v\nwant %+v", u.Sandboxes, wantBoxes)
		}
		wantMCP := []MCPUsage{
			{Agent: "helper", User: "alice", Server: "db", Calls: 1, Refused: 1},
			{Agent: "helper", User: "alice", Server: "weather", Calls: 3, Errors: 2},
			{Agent: "helper", User: "bob", Server: "db", Calls: 1, Refused: 1},
		}
		if !reflect.DeepEqual(u.MCP, wantMCP) {
			t.Errorf("mcp:\n got %+v\nwant %+v", u.MCP, wantMCP)
		}

		// Narrowed to one user and one agent.
		f := win
		f.User, f.Agent = "alice", "other"
		u, err = st.Usage(ctx, f)
		must(t, err)
		if len(u.Tokens) != 0 || len(u.MCP) != 0 || !reflect.DeepEqual(u.Sandboxes, wantBoxes[2:]) {
			t.Errorf("alice's usage of other: %+v", u)
		}
		f.Agent = ""
		f.User = "bob"
		u, err = st.Usage(ctx, f)
		must(t, err)
		if !reflect.DeepEqual(u.Tokens, wantTokens[2:]) || !reflect.DeepEqual(u.Sandboxes, wantBoxes[1:2]) || !reflect.DeepEqual(u.MCP, wantMCP[2:]) {
			t.Errorf("bob's usage: %+v", u)
		}

		// A window that ends now counts a running sandbox up to now, not to its end.
		st.now = func() time.Time { return usageT0.Add(150 * time.Minute) }
		u, err = st.Usage(ctx, UsageFilter{From: usageT0, To: usageT0.Add(24 * time.Hour), User: "alice", Agent: "helper"})
		must(t, err)
		if len(u.Sandboxes) != 1 || u.Sandboxes[0].Running != 90*time.Minute {
			t.Errorf("running up to now: %+v", u.Sandboxes)
		}
	})
}

func TestUsageWindowIsBounded(t *testing.T) {
	st := openAt(t, freshURL(t, sqlite))
	ctx := context.Background()
	for _, c := range []struct{ from, to time.Time }{
		{usageT0, usageT0},
		{usageT0, usageT0.Add(-time.Hour)},
		{usageT0, usageT0.Add(MaxUsageWindow + time.Hour)},
		{time.Time{}, usageT0},
	} {
		if _, err := st.Usage(ctx, UsageFilter{From: c.from, To: c.to}); !errors.Is(err, ErrUsageWindow) {
			t.Errorf("window [%s, %s): got %v, want ErrUsageWindow", c.from, c.to, err)
		}
	}
	if _, err := st.Usage(ctx, UsageFilter{From: usageT0, To: usageT0.Add(MaxUsageWindow)}); err != nil {
		t.Errorf("the longest window: %v", err)
	}
}

// On PostgreSQL a team role, which reads its agents' sessions but never their events,
// is told usage needs the event log; a harness role reads everyone's.
func TestUsageRoles(t *testing.T) {
	p := newRLSPlane(t)
	ctx := context.Background()
	h := p.asHarness
	must(t, h.CreateSession(ctx, Session{ID: "sa", Agent: "helper", Owner: "carol"}))
	if _, err := h.AppendEvent(ctx, "sa", "r1", "usage", []byte(`{"step":{"input_tokens":5,"output_tokens":2}}`)); err != nil {
		t.Fatal(err)
	}
	win := UsageFilter{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)}
	u, err := h.Usage(ctx, win)
	must(t, err)
	if len(u.Tokens) != 1 || u.Tokens[0].InputTokens != 5 || u.Tokens[0].User != "carol" {
		t.Errorf("harness role's usage: %+v", u.Tokens)
	}
	if _, err := p.asAlice.Usage(ctx, win); !errors.Is(err, ErrUsageNotReadable) {
		t.Errorf("team role: got %v, want ErrUsageNotReadable", err)
	}
}
