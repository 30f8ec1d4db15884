package runner_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// skillScript is the replay of the skills tests: a Q&A turn, a turn that only sees the
// skills list, then loads of skill greet with its script run, and loads again after
// what the tests change between turns.
func skillScript() map[string]any {
	load := call(tools.NameLoadSkill, map[string]any{"name": "greet"})
	return harnesstest.Script(
		text("Paris."), // 0: Q&A
		text("I have a greet skill; shall I load it?"), // 1: sees only the list
		load, // 2
		exec(`cat .skills/greet/SKILL.md; .skills/greet/scripts/hello.sh; stat -c '%a %n' .skills/greet .skills/greet/scripts/hello.sh .skills/greet/notes/usage.md; `+
			`touch .skills/greet/new 2>/dev/null && echo WRITABLE || echo READ-ONLY`), // 3
		text("Loaded and ran."),                // 4
		load,                                   // 5: the same sandbox
		text("Still loaded."),                  // 6
		load,                                   // 7: the sandbox removed its copy
		text("Written again."),                 // 8
		load,                                   // 9: re-applied, the same sandbox
		text("Kept."),                          // 10
		load,                                   // 11: a new sandbox generation
		exec(".skills/greet/scripts/hello.sh"), // 12
		text("Reloaded."),                      // 13
	)
}

// addSkilledAgent stores agent skilled on environment env with the replay and skill sk
// published (its content stored as apply stores it).
func addSkilledAgent(t *testing.T, st *store.Store, env string, sk agentspec.Skill, blob store.SkillBlob) {
	t.Helper()
	harnesstest.AddAgent(t, st, "skilled", env, harnesstest.AgentSpec{
		"model": skillScript(), "sandbox": harnesstest.Sandbox(env, 15, 60, 120), "skills": []agentspec.Skill{sk},
	})
	reapplySkill(t, st, sk, blob)
}

// reapplySkill rewrites agent skilled with skill sk, as apply does after a file of the
// skill changed.
func reapplySkill(t *testing.T, st *store.Store, sk agentspec.Skill, blob store.SkillBlob) {
	t.Helper()
	row, err := st.GetAgent(context.Background(), "skilled")
	if err != nil {
		t.Fatal(err)
	}
	s, err := agentspec.Decode(row.Spec)
	if err != nil {
		t.Fatal(err)
	}
	s.Skills = []agentspec.Skill{sk}
	harnesstest.ApplyAgent(t, st, s, blob)
}

func greetSkill(t *testing.T, version string) (string, agentspec.Skill, store.SkillBlob) {
	dir := harnesstest.SkillFolder(t, "greet", map[string]string{
		"scripts/hello.sh*": "#!/bin/sh\necho hello " + version + "\n", "notes/usage.md": "Run scripts/hello.sh.",
	})
	sk, blob := harnesstest.PublishSkill(t, dir)
	return dir, sk, blob
}

func resultOf(t *testing.T, st *store.Store, sid, tool string) []string {
	t.Helper()
	var out []string
	for _, r := range results(t, st, sid) {
		if r["name"] == tool {
			out = append(out, r["text"].(string))
		}
	}
	return out
}

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Fatalf("%s lacks %q:\n%s", what, w, got)
		}
	}
}

// Skills on the local backend: the model sees each skill's name and description in
// load_skill's description, and neither a Q&A turn nor a turn that only sees that list
// provisions a sandbox. Loading the skill provisions one and writes the published files,
// read-only and with the executable bit, where the model's commands find and run them.
// A second load in the same sandbox writes nothing; a skill re-applied with a changed
// file leaves that sandbox's copy as it is and reaches the session's next sandbox.
func TestSkillsLoadedOnDemand(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	st := f.env.Store
	dir, sk, blob := greetSkill(t, "v1")
	addSkilledAgent(t, st, "default", sk, blob)
	r := f.runner(t, "skilled")
	sid := ownerSession(t, r)

	// The list is in the tool's description, built from the spec alone.
	var desc string
	for _, s := range r.Tools.AllSpecs(ctx, r.Agent) {
		if s.Name == tools.NameLoadSkill {
			desc = s.Description
		}
	}
	mustContain(t, "load_skill's description", desc, "- greet: Does greet things.", ".skills/<name>/")
	mustRun(t, r, sid, "What is the capital of France?")
	mustRun(t, r, sid, "What can you do?")
	if n := f.env.Runtime.Total(); n != 0 {
		t.Fatalf("a Q&A turn and a turn that only sees the skills list made %d sandbox calls; want 0", n)
	}
	if _, err := st.GetSessionSandbox(ctx, sid); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a sandbox record before any skill was loaded: %v", err)
	}

	mustRun(t, r, sid, "Load greet and run it.")
	if n := f.env.Runtime.Calls("Create"); n != 1 {
		t.Fatalf("Create called %d times by the load; want 1", n)
	}
	loads := resultOf(t, st, sid, tools.NameLoadSkill)
	mustContain(t, "the load's result", loads[0], `Loaded skill "greet" (`+sk.Digest+`) into .skills/greet/`, "read-only", "scripts/hello.sh (", "executable",
		"SKILL.md:\n---\nname: greet")
	mustContain(t, "the script's run", lastResult(t, st, sid), "name: greet", "hello v1", "555 .skills/greet\n", "555 .skills/greet/scripts/hello.sh", "444 .skills/greet/notes/usage.md", "READ-ONLY")
	ev := harnesstest.Payloads(t, st, sid, events.KindSkillLoaded)
	if len(ev) != 1 || ev[0]["digest"] != sk.Digest || ev[0]["generation"].(float64) != 1 {
		t.Fatalf("skill_loaded events %v", ev)
	}

	writes := f.env.Runtime.Calls("WriteFile")
	mustRun(t, r, sid, "Load it again.")
	if n := f.env.Runtime.Calls("WriteFile"); n != writes {
		t.Fatalf("a second load in the same sandbox wrote %d files", n-writes)
	}
	mustContain(t, "the second load's result", resultOf(t, st, sid, tools.NameLoadSkill)[1], "already loaded in this sandbox", "hello.sh")

	// The sandbox's copy is its own: removed, the next load writes it again.
	rec, err := st.GetSessionSandbox(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := f.env.Runtime.Exec(ctx, rec.SandboxID, sandbox.ExecRequest{Shell: "chmod -R u+w .skills && rm -rf .skills/greet"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("removing the sandbox's copy: %+v, %v", res, err)
	}

	mustRun(t, r, sid, "Load it after removing it.")
	mustContain(t, "the load after the copy was removed", resultOf(t, st, sid, tools.NameLoadSkill)[2], `Loaded skill "greet" (`+sk.Digest+`)`)
	writes = f.env.Runtime.Calls("WriteFile")

	// A file changes and the agent is applied again: the sandbox keeps its copy.
	harnesstest.WriteSkillFile(t, dir, "scripts/hello.sh*", "#!/bin/sh\necho hello v2\n")
	sk2, blob2 := harnesstest.PublishSkill(t, dir)
	reapplySkill(t, st, sk2, blob2)
	if _, err := st.GetSkillBlob(ctx, sk.Digest); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the first version's content outlived the re-apply: %v", err)
	}
	r = f.runner(t, "skilled")
	mustRun(t, r, sid, "Load it once more.")
	mustContain(t, "the load after a re-apply", resultOf(t, st, sid, tools.NameLoadSkill)[3], sk.Digest, "stays as it is", sk2.Digest, "next sandbox", "name: greet")
	if n := f.env.Runtime.Calls("WriteFile"); n != writes {
		t.Fatal("the re-applied skill was written into the sandbox that had loaded the first version")
	}

	// The sandbox is lost; the next load provisions generation 2 with the new files.
	if err := f.env.Runtime.Delete(ctx, rec.SandboxID); err != nil {
		t.Fatal(err)
	}
	mustRun(t, r, sid, "Load it in the new sandbox.")
	if n := f.env.Runtime.Calls("Create"); n != 2 {
		t.Fatalf("Create called %d times; want a second sandbox", n)
	}
	mustContain(t, "the load in the new sandbox", resultOf(t, st, sid, tools.NameLoadSkill)[4], `Loaded skill "greet" (`+sk2.Digest+`)`)
	mustContain(t, "the script in the new sandbox", lastResult(t, st, sid), "hello v2")
	ev = harnesstest.Payloads(t, st, sid, events.KindSkillLoaded)
	if len(ev) != 3 || ev[2]["digest"] != sk2.Digest || ev[2]["generation"].(float64) != 2 {
		t.Fatalf("skill_loaded events %v", ev)
	}
}

// A load that cannot succeed (an unknown skill, one published before skills' content
// was stored, content gone from the control plane) is an error for the model and
// provisions nothing.
func TestLoadSkillRefusalsProvisionNothing(t *testing.T) {
	f := newFixture(t)
	st := f.env.Store
	_, sk, _ := greetSkill(t, "v1")
	old := agentspec.Skill{Name: "legacy", Path: "/srv/skills/legacy"}
	harnesstest.AddAgent(t, st, "skilled", "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(
			call(tools.NameLoadSkill, map[string]any{"name": "nope"}),
			call(tools.NameLoadSkill, map[string]any{"name": "legacy"}),
			call(tools.NameLoadSkill, map[string]any{"name": "greet"}), // its content was never stored
			text("None of them."),
		),
		"sandbox": harnesstest.Sandbox("default", 15, 60, 120), "skills": []agentspec.Skill{sk, old},
	})
	r := f.runner(t, "skilled")
	sid := ownerSession(t, r)
	mustRun(t, r, sid, "Load things.")
	got := resultOf(t, st, sid, tools.NameLoadSkill)
	for i, want := range []string{`no skill "nope"; this agent's skills are: greet, legacy`, "run terraform apply", "no longer in the control plane"} {
		mustContain(t, "refusal", got[i], want)
	}
	if n := f.env.Runtime.Total(); n != 0 {
		t.Fatalf("refused loads made %d sandbox calls; want 0", n)
	}
}
