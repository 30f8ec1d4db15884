package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
)

// The documented -o json schema of each command (docs/guides/running-agents.md, "Output
// for scripts"): each object has exactly these fields.
var (
	agentFields       = []string{"name", "description", "owner", "model_provider", "model", "sandbox", "environment", "code_mode", "skills", "mcp_servers"}
	environmentFields = []string{"name", "provider", "owner", "status", "snapshot", "image", "cpu", "memory_gb", "disk_gb"}
	sessionFields     = []string{"id", "agent", "owner", "replay", "input_tokens", "output_tokens", "created_at", "updated_at", "sandbox"}
	sandboxFields     = []string{"id", "session", "state", "snapshot", "environment", "provider", "generation", "last_used_at", "active_execs", "uncertain", "orphan"}
	showFields        = append(slices.Clone(sessionFields), "runs", "events")
	runFields         = []string{"id", "status", "detail", "started_at", "ended_at"}
	eventFields       = []string{"seq", "run_id", "kind", "at", "payload"}
	filesFields       = []string{"offered", "workspace"}
	offeredFields     = []string{"path", "size", "sha256", "classification", "expires_at", "snapshot", "sandbox", "source_event", "commands", "manifest_digest", "session_installs", "provenance", "detected_type", "scan", "may_download"}
	workspaceFields   = []string{"sandbox", "state", "listed", "reason", "files", "omitted", "omitted_at_least"}
	fileFields        = []string{"path", "path_encoded", "size", "mode"}
	userFields        = []string{"name", "admin", "created_at", "token_rotated_at"}
)

func checkFields(t *testing.T, what string, obj map[string]any, want []string) {
	t.Helper()
	var got []string
	for k := range obj {
		got = append(got, k)
	}
	sort.Strings(got)
	w := slices.Clone(want)
	sort.Strings(w)
	if !slices.Equal(got, w) {
		t.Fatalf("%s has fields %v; the documented schema is %v", what, got, w)
	}
}

// jsonOf runs a command with -o json and parses what it printed.
func jsonOf[T any](t *testing.T, db string, args ...string) T {
	t.Helper()
	out, errOut, err := run(t, db, "", append(args, "-o", "json")...)
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, errOut)
	}
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v -o json does not parse: %v\n%s", args, err, out)
	}
	return v
}

// -o json of every list and show command parses, with the documented fields.
func TestOutputJSONSchemas(t *testing.T) {
	env := harnesstest.NewEnv(t)
	db := env.Store.Path()
	call := func(name string, args map[string]any) map[string]any {
		return map[string]any{"tool_calls": []any{map[string]any{"name": name, "arguments": args}}}
	}
	harnesstest.AddAgent(t, env.Store, "reporter", "default", harnesstest.AgentSpec{
		"description": "Writes a report.",
		"model": harnesstest.Script(
			call("write_file", map[string]any{"path": "report.txt", "content": "offered\n"}),
			call("offer_artifact", map[string]any{"path": "report.txt"}),
			map[string]any{"text": "done"}),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120),
	})
	harnesstest.AddAgent(t, env.Store, "talker", "default", harnesstest.AgentSpec{"model": harnesstest.Script(map[string]any{"text": "Hi."})})
	if _, _, err := run(t, db, "", "run", "reporter", "go"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, db, "", "run", "talker", "hi"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, db, "", "users", "add", "alice"); err != nil {
		t.Fatal(err)
	}

	agents := jsonOf[[]map[string]any](t, db, "agents", "list")
	if len(agents) != 2 || agents[0]["name"] != "reporter" || agents[0]["sandbox"] != true || agents[0]["environment"] != "default" ||
		agents[0]["description"] != "Writes a report." || agents[0]["model_provider"] != "scripted" || agents[1]["sandbox"] != false {
		t.Fatalf("agents list: %v", agents)
	}
	for _, a := range agents {
		checkFields(t, "agents list item", a, agentFields)
	}
	checkFields(t, "agents show", jsonOf[map[string]any](t, db, "agents", "show", "reporter"), agentFields)

	envs := jsonOf[[]map[string]any](t, db, "environments", "list")
	if len(envs) != 1 || envs[0]["name"] != "default" || envs[0]["status"] != "Ready" || envs[0]["snapshot"] != env.Snapshot {
		t.Fatalf("environments list: %v", envs)
	}
	checkFields(t, "environments list item", envs[0], environmentFields)

	sessions := jsonOf[[]map[string]any](t, db, "sessions", "list")
	if len(sessions) != 2 {
		t.Fatalf("sessions list: %v", sessions)
	}
	var withSandbox string
	for _, s := range sessions {
		checkFields(t, "sessions list item", s, sessionFields)
		if sb, ok := s["sandbox"].(map[string]any); ok {
			checkFields(t, "a session's sandbox", sb, sandboxFields)
			withSandbox = s["id"].(string)
		} else if s["sandbox"] != nil {
			t.Fatalf("sandbox is %v; want an object or null", s["sandbox"])
		}
	}
	if withSandbox == "" {
		t.Fatalf("no session lists its sandbox: %v", sessions)
	}

	show := jsonOf[map[string]any](t, db, "sessions", "show", withSandbox)
	checkFields(t, "sessions show", show, showFields)
	runs, _ := show["runs"].([]any)
	evs, _ := show["events"].([]any)
	if len(runs) != 1 || len(evs) < 5 {
		t.Fatalf("sessions show: %d runs, %d events", len(runs), len(evs))
	}
	checkFields(t, "a run", runs[0].(map[string]any), runFields)
	for _, e := range evs {
		checkFields(t, "an event", e.(map[string]any), eventFields)
	}

	files := jsonOf[map[string]any](t, db, "files", "list", withSandbox)
	checkFields(t, "files list", files, filesFields)
	offered, _ := files["offered"].([]any)
	if len(offered) != 1 {
		t.Fatalf("files list: %v", files)
	}
	checkFields(t, "an offered file", offered[0].(map[string]any), offeredFields)
	ws := files["workspace"].(map[string]any)
	checkFields(t, "the workspace", ws, workspaceFields)
	wsFiles, _ := ws["files"].([]any)
	if ws["listed"] != true || len(wsFiles) == 0 {
		t.Fatalf("workspace: %v", ws)
	}
	checkFields(t, "a workspace file", wsFiles[0].(map[string]any), fileFields)

	sbs := jsonOf[[]map[string]any](t, db, "sandboxes", "list")
	if len(sbs) != 1 || sbs[0]["session"] != withSandbox || sbs[0]["orphan"] != false {
		t.Fatalf("sandboxes list: %v", sbs)
	}
	checkFields(t, "sandboxes list item", sbs[0], sandboxFields)

	users := jsonOf[[]map[string]any](t, db, "users", "list")
	if len(users) != 1 {
		t.Fatalf("users list: %v", users)
	}
	checkFields(t, "users list item", users[0], userFields)

	// Empty lists are arrays, never null.
	if out, _, err := run(t, db, "", "--owner", "nobody", "sessions", "list", "-o", "json"); err != nil || strings.TrimSpace(out) != "[]" {
		t.Fatalf("an empty sessions list: %v %q", err, out)
	}
}

// The old meanings of --output and -o are refused with the new spelling named.
func TestOldOutputSpellingsAreRefused(t *testing.T) {
	st := seed(t)
	if _, _, err := run(t, st.Path(), "", "run", "talker", "hi"); err != nil {
		t.Fatal(err)
	}
	ss, _ := st.ListSessions(context.Background(), "", "talker")
	if len(ss) != 1 {
		t.Fatalf("%d sessions", len(ss))
	}
	_, _, err := run(t, st.Path(), "", "sessions", "show", ss[0].ID, "--output", "replay-0-0")
	if err == nil || exitStatus(err) != exitUsage ||
		err.Error() != "--output now picks the format (json or table); use --tool-output CALL_ID for a call's full output" {
		t.Fatalf("sessions show --output CALL: %v", err)
	}
	dest := filepath.Join(t.TempDir(), "out.txt")
	_, _, err = run(t, st.Path(), "", "files", "get", ss[0].ID, "report.txt", "-o", dest)
	if err == nil || exitStatus(err) != exitUsage || !strings.Contains(err.Error(), "use --dest "+dest) {
		t.Fatalf("files get -o FILE: %v", err)
	}
	if _, err := os.Stat(dest); err == nil {
		t.Fatal("files get -o wrote the file")
	}
}

// run AGENT - reads the prompt from stdin; an empty stdin is a usage error.
func TestRunReadsThePromptFromStdin(t *testing.T) {
	st := seed(t)
	if _, _, err := run(t, st.Path(), "the question\nover two lines\n", "run", "talker", "-"); err != nil {
		t.Fatal(err)
	}
	ss, _ := st.ListSessions(context.Background(), "", "talker")
	if len(ss) != 1 {
		t.Fatalf("%d sessions", len(ss))
	}
	show := jsonOf[map[string]any](t, st.Path(), "sessions", "show", ss[0].ID)
	first := show["events"].([]any)[0].(map[string]any)
	if first["kind"] != "user_message" || first["payload"].(map[string]any)["text"] != "the question\nover two lines" {
		t.Fatalf("first event: %v", first)
	}
	if _, _, err := run(t, st.Path(), "\n", "run", "talker", "-"); exitStatus(err) != exitUsage || !strings.Contains(err.Error(), "stdin held no prompt") {
		t.Fatalf("empty stdin: %v", err)
	}
	if ss, _ := st.ListSessions(context.Background(), "", "talker"); len(ss) != 1 {
		t.Fatalf("an empty prompt made a session: %d sessions", len(ss))
	}
}

// Completion (cobra's __complete, which the generated shell scripts call) offers the
// database's agent names and the caller's session ids.
func TestCompletionFromTheDatabase(t *testing.T) {
	st := seed(t)
	if _, _, err := run(t, st.Path(), "", "run", "talker", "hi"); err != nil {
		t.Fatal(err)
	}
	ss, _ := st.ListSessions(context.Background(), "", "talker")
	id := ss[0].ID
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"run", ""}, []string{"coder", "talker"}},
		{[]string{"chat", "ta"}, []string{"coder", "talker"}}, // the shell filters by prefix
		{[]string{"agents", "show", ""}, []string{"coder", "talker"}},
		{[]string{"run", "talker", "hi", "--session", ""}, []string{id + "\ttalker"}},
		{[]string{"sessions", "show", ""}, []string{id + "\ttalker"}},
		{[]string{"sessions", "delete", ""}, []string{id + "\ttalker"}},
		{[]string{"files", "list", ""}, []string{id + "\ttalker"}},
		{[]string{"files", "get", ""}, []string{id + "\ttalker"}},
	} {
		out, errOut, err := run(t, st.Path(), "", append([]string{"__complete"}, c.args...)...)
		if err != nil {
			t.Fatalf("__complete %v: %v\n%s", c.args, err, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		got := lines[:len(lines)-1] // the last line is cobra's directive
		if !slices.Equal(got, c.want) || lines[len(lines)-1] != ":4" {
			t.Fatalf("__complete %v: %q; want %q and :4 (no file completion)", c.args, lines, c.want)
		}
	}
	// Another owner is offered none of our sessions.
	out, _, _ := run(t, st.Path(), "", "--owner", "mallory", "__complete", "sessions", "show", "")
	if strings.Contains(out, id) {
		t.Fatalf("mallory is offered our session:\n%s", out)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out, _, err := run(t, st.Path(), "", "completion", shell)
		if err != nil || !strings.Contains(out, "trueforge-harness") {
			t.Fatalf("completion %s: %v", shell, err)
		}
	}
}
