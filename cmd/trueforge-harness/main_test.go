package main

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// run executes the CLI in-process against the database at db.
func run(t *testing.T, db string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(append([]string{"--database-url", db, "--owner", harnesstest.Owner}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func seed(t *testing.T) *store.Store {
	st := harnesstest.NewStore(t)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.CreateSandboxProvider(ctx, store.SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: harnesstest.Owner}))
	_, _, err := st.ClaimSnapshot(ctx, store.Snapshot{ID: "snap-b", Provider: "local", BuildHash: "h", Spec: "{}"}, "Building", "Failed")
	must(err)
	must(st.CreateEnvironment(ctx, store.Environment{ID: "e", Name: "py", Provider: "local", Owner: harnesstest.Owner, Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h", SnapshotID: "snap-b"}))
	harnesstest.AddAgent(t, st, "talker", "py", harnesstest.AgentSpec{"model": harnesstest.Script(map[string]any{"text": "Hello there."}, map[string]any{"text": "Second answer."})})
	harnesstest.AddAgent(t, st, "coder", "py", harnesstest.AgentSpec{"model": harnesstest.Script(), "sandbox": harnesstest.Sandbox("py", 1, 2, 3)})
	return st
}

func TestCLIErrorsNameTheProblem(t *testing.T) {
	st := seed(t)
	_, _, err := run(t, st.Path(), "", "run", "ghost", "hi")
	if err == nil || !strings.Contains(err.Error(), `agent "ghost" is not in the control-plane database`) || !strings.Contains(err.Error(), "coder, talker") {
		t.Fatalf("missing agent: %v", err)
	}
	_, _, err = run(t, st.Path(), "", "run", "coder", "hi")
	if err == nil || !strings.Contains(err.Error(), `environment "py" is Building, not Ready`) {
		t.Fatalf("environment not Ready: %v", err)
	}
	_, _, err = run(t, st.Path(), "", "run", "talker", "hi", "--session", "s-nope")
	if err == nil || !strings.Contains(err.Error(), "sessions list") {
		t.Fatalf("unknown session: %v", err)
	}
}

func TestCLIChatRunsTurnsAndLabelsTheReplay(t *testing.T) {
	st := seed(t)
	out, _, err := run(t, st.Path(), "hi\nand again\n", "chat", "talker")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"REPLAY of a scripted model", "agent [replay]: Hello there.", "agent [replay]: Second answer."} {
		if !strings.Contains(out, want) {
			t.Fatalf("chat output lacks %q:\n%s", want, out)
		}
	}
	list, _, err := run(t, st.Path(), "", "sessions", "list")
	if err != nil || !strings.Contains(list, "talker") || !strings.Contains(list, "replay") || !strings.Contains(list, "none") {
		t.Fatalf("sessions list: %v\n%s", err, list)
	}
	ss, _ := st.ListSessions(context.Background(), "", "talker")
	if len(ss) != 1 {
		t.Fatalf("%d sessions; want the chat's one", len(ss))
	}
	show, _, err := run(t, st.Path(), "", "sessions", "show", ss[0].ID)
	if err != nil || !strings.Contains(show, "REPLAY") || !strings.Contains(show, "sandbox: none provisioned") {
		t.Fatalf("sessions show: %v\n%s", err, show)
	}
	_, _, err = run(t, st.Path(), "", "--owner", "mallory", "sessions", "show", ss[0].ID)
	if err == nil || !strings.Contains(err.Error(), "belongs to") {
		t.Fatalf("another owner read the session: %v", err)
	}
	// Nor continue it, by run or by chat.
	for _, args := range [][]string{{"run", "--session", ss[0].ID, "talker", "hi"}, {"chat", "--session", ss[0].ID, "talker"}} {
		_, _, err = run(t, st.Path(), "hi\n", append([]string{"--owner", "mallory"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "belongs to") {
			t.Fatalf("another owner continued the session with %s: %v", args[0], err)
		}
	}
	if _, _, err := run(t, st.Path(), "", "sessions", "delete", ss[0].ID); err != nil {
		t.Fatal(err)
	}
	if left, _ := st.ListSessions(context.Background(), "", ""); len(left) != 0 {
		t.Fatalf("%d sessions left after delete", len(left))
	}
}

// In chat, an interrupt during a turn cancels that turn only; the next line still runs.
func TestChatInterruptCancelsTheTurnNotTheSession(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	var out bytes.Buffer
	var turns []string
	var cancelled []bool
	err := chatLoop(context.Background(), strings.NewReader("long job\nnext\n"), &out, sigs, func(ctx context.Context, line string, _ <-chan string) error {
		turns = append(turns, line)
		if line == "long job" {
			sigs <- os.Interrupt
			select {
			case <-ctx.Done():
				cancelled = append(cancelled, true)
			case <-time.After(5 * time.Second):
				cancelled = append(cancelled, false)
			}
			return nil
		}
		cancelled = append(cancelled, ctx.Err() != nil)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(turns, "|") != "long job|next" || !cancelled[0] || cancelled[1] {
		t.Fatalf("turns %v, cancelled %v; want the first cancelled and the second run", turns, cancelled)
	}
	if !strings.Contains(out.String(), "cancelling the turn (the session stays)") {
		t.Fatalf("output: %s", out.String())
	}
}

func TestServeOnceWithNothingToReap(t *testing.T) {
	st := seed(t)
	out, _, err := run(t, st.Path(), "", "serve", "--once")
	if err != nil || out != "" {
		t.Fatalf("serve --once: %v %q", err, out)
	}
	v, _, _ := run(t, st.Path(), "", "version")
	if !strings.HasPrefix(v, "trueforge-harness ") {
		t.Fatalf("version: %q", v)
	}
}

// Orphans (backend sandboxes of the harness no session points at) are listed and swept;
// a session's live sandbox is kept.
func TestSandboxesGCDeletesOnlyOrphans(t *testing.T) {
	env := harnesstest.NewEnv(t)
	ctx := context.Background()
	harnesstest.AddAgent(t, env.Store, "coder", "default", harnesstest.AgentSpec{
		"model":   harnesstest.Script(map[string]any{"tool_calls": []any{map[string]any{"name": "exec", "arguments": map[string]any{"command": "true"}}}}, map[string]any{"text": "ok"}),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
	if _, _, err := run(t, env.Store.Path(), "", "run", "coder", "go"); err != nil {
		t.Fatal(err)
	}
	// A sandbox a dead harness created for a session that is gone (labelled with our
	// owner), one of another owner's, and one that is not the harness's although named
	// like its sandboxes (no label).
	ghost := sandbox.CreateRequest{ID: "tf-s-ghost-1", SnapshotID: env.Snapshot, BlockNetwork: true,
		Labels: map[string]string{lifecycle.LabelSession: "s-ghost", lifecycle.LabelOwner: harnesstest.Owner}}
	if err := env.Runtime.Runtime.Create(ctx, ghost); err != nil {
		t.Fatal(err)
	}
	theirs := sandbox.CreateRequest{ID: "tf-s-theirs-1", SnapshotID: env.Snapshot, BlockNetwork: true,
		Labels: map[string]string{lifecycle.LabelSession: "s-theirs", lifecycle.LabelOwner: "mallory"}}
	if err := env.Runtime.Runtime.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	if err := env.Runtime.Runtime.Create(ctx, sandbox.CreateRequest{ID: "tf-s-stranger-1", SnapshotID: env.Snapshot, BlockNetwork: true}); err != nil {
		t.Fatal(err)
	}
	list, _, err := run(t, env.Store.Path(), "", "sandboxes", "list")
	if err != nil || !strings.Contains(list, "tf-s-ghost-1") || !strings.Contains(list, "(orphan)") {
		t.Fatalf("sandboxes list: %v\n%s", err, list)
	}
	// Just created: a harness may be about to record it, so gc leaves it by default.
	out, _, err := run(t, env.Store.Path(), "", "sandboxes", "gc")
	if err != nil || !strings.Contains(out, "0 orphan") {
		t.Fatalf("sandboxes gc deleted a young sandbox: %v\n%s", err, out)
	}
	out, _, err = run(t, env.Store.Path(), "", "sandboxes", "gc", "--min-age", "0")
	if err != nil || !strings.Contains(out, "deleted orphan sandbox tf-s-ghost-1") || !strings.Contains(out, "1 orphan") {
		t.Fatalf("sandboxes gc: %v\n%s", err, out)
	}
	for _, other := range []string{"tf-s-stranger-1", "tf-s-theirs-1"} {
		if strings.Contains(list, other) || strings.Contains(out, other) {
			t.Fatalf("%s (not ours) was taken for our orphan:\n%s\n%s", other, list, out)
		}
	}
	infos, _ := env.Runtime.Runtime.List(ctx)
	var ids []string
	for _, i := range infos {
		ids = append(ids, i.ID)
	}
	if len(infos) != 3 || slices.Contains(ids, "tf-s-ghost-1") || !slices.Contains(ids, "tf-s-stranger-1") || !slices.Contains(ids, "tf-s-theirs-1") {
		t.Fatalf("after gc: %v; want the session's sandbox, the other owner's and the unlabelled one", ids)
	}
	// Another owner sees neither our session's sandbox nor our orphans, and their gc
	// deletes only theirs.
	list, _, err = run(t, env.Store.Path(), "", "--owner", "mallory", "sandboxes", "list")
	if err != nil || strings.Contains(list, "tf-s-") && !strings.Contains(list, "tf-s-theirs-1") || strings.Count(list, "tf-s-") != 1 {
		t.Fatalf("mallory's sandboxes list shows more than her orphan: %v\n%s", err, list)
	}
	out, _, err = run(t, env.Store.Path(), "", "--owner", "mallory", "sandboxes", "gc", "--min-age", "0")
	if err != nil || !strings.Contains(out, "deleted orphan sandbox tf-s-theirs-1") || !strings.Contains(out, "1 orphan") {
		t.Fatalf("mallory's gc: %v\n%s", err, out)
	}
	if infos, _ := env.Runtime.Runtime.List(ctx); len(infos) != 2 {
		t.Fatalf("after mallory's gc: %d sandboxes; want our session's and the unlabelled one", len(infos))
	}
}

// The CLI wires the egress proxy of local sandboxes (with this harness, built static, as
// the netd helper): a request to a host off the allow list is refused, the model reads
// why, and `sessions show` lists the decision.
func TestCLIRunShowsEgressDecisions(t *testing.T) {
	env := harnesstest.NewEnv(t)
	ctx := context.Background()
	e, err := env.Store.GetEnvironment(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	e.AllowDomains = []string{"api.allowed.test"}
	if err := env.Store.UpdateEnvironment(ctx, e); err != nil {
		t.Fatal(err)
	}
	harnesstest.AddAgent(t, env.Store, "netter", "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			map[string]any{"tool_calls": []any{map[string]any{"name": "exec", "arguments": map[string]any{"command": "curl -sS --max-time 10 http://evil.test/; echo; curl -sS -o /dev/null --max-time 10 https://evil.test/; echo rc=$?"}}}},
			map[string]any{"text": "refused"}),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
	out, _, err := run(t, env.Store.Path(), "", "run", "netter", "go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"reason":"not_allowed"`) || !strings.Contains(out, "rc=56") {
		t.Fatalf("run output lacks the refusal the model reads:\n%s", out)
	}
	ss, _ := env.Store.ListSessions(ctx, "", "netter")
	if len(ss) != 1 {
		t.Fatalf("%d sessions", len(ss))
	}
	show, _, err := run(t, env.Store.Path(), "", "sessions", "show", ss[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[egress] DENIED plain evil.test:80 GET /: not_allowed", "[egress] DENIED tunnel evil.test:443"} {
		if !strings.Contains(show, want) {
			t.Fatalf("sessions show lacks %q:\n%s", want, show)
		}
	}
}

// Skills and Code Mode run: a run of an agent that sets them warns about neither (this
// harness once said on stderr that it did not run them).
func TestRunRunsSkillsWithoutWarning(t *testing.T) {
	st := seed(t)
	harnesstest.AddAgent(t, st, "skilled", "py", harnesstest.AgentSpec{
		"model":     harnesstest.Script(map[string]any{"text": "Hi."}),
		"code_mode": true,
		"skills":    []map[string]any{{"name": "pdf", "path": "skills/pdf"}},
	})
	out, errOut, err := run(t, st.Path(), "", "run", "skilled", "hi")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Hi.") {
		t.Fatalf("the agent did not answer:\n%s", out)
	}
	for _, unwanted := range []string{"does not run", "Skills", "Code Mode"} {
		if strings.Contains(errOut, unwanted) {
			t.Fatalf("stderr says %q:\n%s", unwanted, errOut)
		}
	}
}

// A session belongs to whoever talks to the agent, not to the agent's publisher: the
// publisher can neither list nor read it, and each user lists only their own sessions.
func TestSessionsBelongToTheCaller(t *testing.T) {
	st := seed(t) // talker is published by harnesstest.Owner
	if _, _, err := run(t, st.Path(), "", "--owner", "bob", "run", "talker", "private question"); err != nil {
		t.Fatal(err)
	}
	ss, _ := st.ListSessions(context.Background(), "", "talker")
	if len(ss) != 1 || ss[0].Owner != "bob" {
		t.Fatalf("sessions %+v; want one owned by bob", ss)
	}
	mine, _, err := run(t, st.Path(), "", "--owner", "bob", "sessions", "list")
	if err != nil || !strings.Contains(mine, ss[0].ID) {
		t.Fatalf("bob's list lacks his session: %v\n%s", err, mine)
	}
	theirs, _, err := run(t, st.Path(), "", "sessions", "list")
	if err != nil || strings.Contains(theirs, ss[0].ID) {
		t.Fatalf("the agent's publisher lists bob's session: %v\n%s", err, theirs)
	}
	for _, args := range [][]string{{"sessions", "show", ss[0].ID}, {"files", "list", ss[0].ID}, {"sessions", "delete", ss[0].ID}} {
		if _, _, err := run(t, st.Path(), "", args...); err == nil || !strings.Contains(err.Error(), "belongs to") {
			t.Fatalf("the agent's publisher ran %v on bob's session: %v", args, err)
		}
	}
}

// files get finds an offer whatever form of its path the user types, so the digest and
// expiry checks apply: "./report.txt" returns what was offered, not what the sandbox
// holds after the offer.
func TestFilesGetUsesTheOfferForAnyPathForm(t *testing.T) {
	env := harnesstest.NewEnv(t)
	call := func(name string, args map[string]any) map[string]any {
		return map[string]any{"tool_calls": []any{map[string]any{"name": name, "arguments": args}}}
	}
	harnesstest.AddAgent(t, env.Store, "reporter", "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			call("write_file", map[string]any{"path": "report.txt", "content": "offered\n"}),
			call("offer_artifact", map[string]any{"path": "report.txt"}),
			call("write_file", map[string]any{"path": "report.txt", "content": "changed after the offer\n"}),
			map[string]any{"text": "done"}),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
	if _, _, err := run(t, env.Store.Path(), "", "run", "reporter", "go"); err != nil {
		t.Fatal(err)
	}
	ss, _ := env.Store.ListSessions(context.Background(), "", "reporter")
	if len(ss) != 1 {
		t.Fatalf("%d sessions", len(ss))
	}
	for _, p := range []string{"report.txt", "./report.txt", "/workspace/report.txt"} {
		out, errOut, err := run(t, env.Store.Path(), "", "files", "get", ss[0].ID, p)
		if err != nil || out != "offered\n" || !strings.Contains(errOut, "verified") {
			t.Fatalf("files get %s: %v\nstdout %q\nstderr %s", p, err, out, errOut)
		}
	}
}

// sessions delete refuses while a live harness runs the session, and deletes once the
// run's harness is gone.
func TestSessionsDeleteRefusesALiveRun(t *testing.T) {
	st := seed(t)
	ctx := context.Background()
	if err := st.CreateSession(ctx, store.Session{ID: "s-busy", Agent: "talker", Owner: harnesstest.Owner}); err != nil {
		t.Fatal(err)
	}
	// A run of a harness on another host: alive as far as this host can tell.
	if err := st.StartRun(ctx, store.Run{ID: "r-1", SessionID: "s-busy", Owner: "peer-host:200:1"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, st.Path(), "", "sessions", "delete", "s-busy"); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("deleted under a live run: %v", err)
	}
	if _, err := st.GetSession(ctx, "s-busy"); err != nil {
		t.Fatalf("the session is gone: %v", err)
	}
	if _, err := st.EndRun(ctx, "r-1", store.RunCompleted, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, st.Path(), "", "sessions", "delete", "s-busy"); err != nil {
		t.Fatal(err)
	}
}
