package main

import (
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/backends"
	"github.com/trueforge/terraform-provider-trueforge/internal/builds"
	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// toolsCheck is a check of an agent that needs python3 and greet-tool (a command the
// test's environment build installs): a Q&A step with no sandbox, then both commands.
const toolsCheck = `{
  "name": "helper still works",
  "steps": [
    {"name": "answers without a sandbox", "message": "What is 2 + 2?", "turns": [{"text": "Four."}], "expect": {"no_sandbox": true}},
    {"name": "python3 runs", "message": "Which Python?",
     "turns": [{"tool_calls": [{"name": "exec", "arguments": {"command": "python3 -c 'print(6*7)'"}}]}, {"text": "42."}],
     "expect": {"exit_codes": [0], "output_matches": ["(?m)^42$"]}},
    {"name": "greet-tool runs", "message": "Greet, and offer the greeting.",
     "turns": [{"tool_calls": [{"name": "exec", "arguments": {"command": "greet-tool > greeting.txt && cat greeting.txt"}}]},
               {"tool_calls": [{"name": "offer_artifact", "arguments": {"path": "greeting.txt"}}]}, {"text": "Offered."}],
     "expect": {"exit_codes": [0], "output_matches": ["hello from greet-tool"], "files_offered": ["greeting.txt"]}}
  ]
}`

// An agent check passes on an environment that has what it needs, and after an
// environment change that removes a command it runs, fails with exit 1 and a JUnit
// failure naming the step; each run's sandbox is deleted after it.
func TestCheckFailsAfterAnEnvironmentChangeRemovesACommand(t *testing.T) {
	env := harnesstest.NewEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st := env.Store
	prov, err := st.GetSandboxProvider(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	be, err := backends.Default().Get("local")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := controlplane.New(st).Provider(ctx, prov)
	if err != nil {
		t.Fatal(err)
	}
	b, err := be.Builder(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	coord := &builds.Coordinator{Store: st, Builder: b, Provider: "local"}
	build := func(script string) (string, string) {
		t.Helper()
		spec := sandbox.SnapshotSpec{Image: sandbox.PlatformImage, BuildScript: script, CPU: 1, MemoryGB: 1, DiskGB: 3}
		snap, err := coord.Ensure(ctx, sandbox.BuildRequest{Spec: spec, Base: env.Snapshot})
		if err != nil {
			t.Fatal(err)
		}
		if snap, err = coord.Wait(ctx, snap.ID); err != nil || snap.Status != sandbox.StatusReady {
			t.Fatalf("build: %+v %v", snap, err)
		}
		t.Cleanup(func() { _ = b.DeleteSnapshot(context.Background(), snap.ID) })
		return spec.BuildHash(), snap.ID
	}
	hash, snap := build(`printf '#!/bin/sh\necho hello from greet-tool\n' > /usr/local/bin/greet-tool && chmod +x /usr/local/bin/greet-tool`)
	e := store.Environment{ID: "env-tools", Name: "tools", Provider: "local", Owner: harnesstest.Owner,
		Image: sandbox.PlatformImage, CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: hash, SnapshotID: snap}
	if err := st.CreateEnvironment(ctx, e); err != nil {
		t.Fatal(err)
	}
	harnesstest.AddAgent(t, st, "helper", "tools", harnesstest.AgentSpec{"model": harnesstest.Script(), "sandbox": harnesstest.Sandbox("tools", 15, 60, 120)})
	dir := t.TempDir()
	file := filepath.Join(dir, "check.json")
	if err := os.WriteFile(file, []byte(toolsCheck), 0o600); err != nil {
		t.Fatal(err)
	}
	junit := filepath.Join(dir, "junit.xml")

	out, errOut, err := run(t, st.Path(), "", "check", "helper", file, "--junit", junit)
	if code := exitStatus(err); code != exitOK || !strings.Contains(out, "check passed: 3 steps") {
		t.Fatalf("check on the environment with greet-tool: exit %d (%v)\n%s\n%s", code, err, out, errOut)
	}
	report := readJUnit(t, junit)
	if report.Suites[0].Tests != 3 || report.Suites[0].Failures != 0 {
		t.Fatalf("passing JUnit report: %+v", report)
	}
	assertNoSandboxLeft(t, env)

	// The environment changes: its build no longer installs greet-tool.
	e.BuildHash, e.SnapshotID = build(`echo no greet-tool any more > /opt/note`)
	if err := st.UpdateEnvironment(ctx, e); err != nil {
		t.Fatal(err)
	}
	out, errOut, err = run(t, st.Path(), "", "check", "helper", file, "--junit", junit)
	if code := exitStatus(err); code != exitError {
		t.Fatalf("check after greet-tool went: exit %d, want 1 (%v)\n%s\n%s", code, err, out, errOut)
	}
	for _, want := range []string{"ok    answers without a sandbox", "ok    python3 runs", "FAIL  greet-tool runs", "exit_codes: want [0]",
		`check failed: step "greet-tool runs": exit_codes`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	report = readJUnit(t, junit)
	s := report.Suites[0]
	if s.Tests != 3 || s.Failures != 1 || s.Cases[2].Failure == nil || s.Cases[0].Failure != nil || s.Cases[1].Failure != nil {
		t.Fatalf("failing JUnit report: %+v", s)
	}
	if f := s.Cases[2].Failure; !strings.Contains(f.Message, `step "greet-tool runs": exit_codes`) || !strings.Contains(s.Cases[2].SystemOut, "greet-tool") {
		t.Errorf("JUnit failure does not name the step and expectation: %+v", s.Cases[2])
	}
	assertNoSandboxLeft(t, env)
}

func readJUnit(t *testing.T, name string) junitReport {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var r junitReport
	if err := xml.Unmarshal(b, &r); err != nil || len(r.Suites) != 1 {
		t.Fatalf("JUnit XML: %v\n%s", err, b)
	}
	return r
}

type junitReport struct {
	Suites []struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Cases    []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
			} `xml:"failure"`
			SystemOut string `xml:"system-out"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func assertNoSandboxLeft(t *testing.T, env *harnesstest.Env) {
	t.Helper()
	list, err := env.Runtime.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Fatalf("%d sandboxes left after the check: %+v", len(list), list)
	}
}

// A check file that is wrong is a usage error naming the field; an agent of another
// owner is refused before anything runs.
func TestCheckRefusesABadFileAndAnotherOwnersAgent(t *testing.T) {
	st := seed(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"steps": [{"message": "hi", "turns": [{"text": "a"}], "expect": {"exit_code": 0}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := run(t, st.Path(), "", "check", "talker", bad)
	if exitStatus(err) != exitUsage || !strings.Contains(err.Error(), `unknown field "exit_code"`) {
		t.Fatalf("bad file: exit %d: %v", exitStatus(err), err)
	}
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"steps": [{"message": "hi", "turns": [{"text": "a"}], "expect": {"no_sandbox": true}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, st.Path(), "", "check", "talker", good); err != nil {
		t.Fatalf("check of a Q&A agent: %v", err)
	}
	_, _, err = run(t, st.Path(), "", "--owner", "mallory", "check", "talker", good)
	if exitStatus(err) != exitError || !strings.Contains(err.Error(), `belongs to "tester"`) {
		t.Fatalf("another owner's check: exit %d: %v", exitStatus(err), err)
	}
	if _, _, err := run(t, st.Path(), "", "check", "talker", filepath.Join(dir, "missing.json")); exitStatus(err) != exitNotFound {
		t.Fatalf("missing file: exit %d: %v", exitStatus(err), err)
	}
	if _, _, err := run(t, st.Path(), "", "check", "ghost", good); exitStatus(err) != exitNotFound || !strings.Contains(err.Error(), `agent "ghost"`) {
		t.Fatalf("missing agent: exit %d: %v", exitStatus(err), err)
	}
}

// On a PostgreSQL control plane the harness role checks a team's agent, as it runs it:
// a check that holds exits 0, one that does not exits 1 naming the step.
func TestCheckOnPostgreSQLAsTheHarnessRole(t *testing.T) {
	pg := storetest.NewHarnessDB(t)
	c, owner, db := pg.Cluster, pg.Owner, pg.Name
	team := c.Role(t, "team_check")
	ctx := context.Background()
	must(t, owner.ApplyRoles(ctx, store.TeamRole, team))
	st, err := store.Open(ctx, c.URL(db, team))
	if err != nil {
		t.Fatal(err)
	}
	addOwnedAgent(t, st, "talker", team, map[string]any{"model": harnesstest.Script()})
	st.Close()
	asHarness := c.URL(db, pg.Harness)
	good := writeFile(t, "good.json", `{"steps": [{"name": "answers", "message": "hi", "turns": [{"text": "hello"}], "expect": {"no_sandbox": true}}]}`)
	if out, err := runAsRole(t, asHarness, "check", "talker", good); err != nil || !strings.Contains(out, "check passed: 1 steps") {
		t.Fatalf("a passing check as the harness role: %v\n%s", err, out)
	}
	bad := writeFile(t, "bad.json", `{"steps": [{"name": "runs code", "message": "hi", "turns": [{"text": "hello"}], "expect": {"exit_codes": [0]}}]}`)
	out, err := runAsRole(t, asHarness, "check", "talker", bad)
	if exitStatus(err) != exitError || !strings.Contains(out, `check failed: step "runs code": exit_codes: want [0] from the step's exec calls, got []`) {
		t.Fatalf("a failing check as the harness role: exit %d (%v)\n%s", exitStatus(err), err, out)
	}
}
