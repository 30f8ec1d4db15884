package runner_test

import (
	"context"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// Skills on the daytona type, on the emulator: the turns that only see the skills list
// send no request to the Daytona API; loading the skill provisions a sandbox whose
// workspace holds the published files (read-only, the script executable), a second load
// writes nothing unless the sandbox removed its copy, and after the sandbox is replaced
// the next load writes the version applied since.
func TestDaytonaSkillsLoadedOnDemand(t *testing.T) {
	f := newDaytonaFixture(t)
	ctx := context.Background()
	dir, sk, blob := greetSkill(t, "v1")
	addSkilledAgent(t, f.st, "dtenv", sk, blob)
	r := f.runner(t, "skilled")
	sid := ownerSession(t, r)
	mustRun(t, r, sid, "What is the capital of France?")
	mustRun(t, r, sid, "What can you do?")
	if n := f.requests(); n != 0 {
		t.Fatalf("turns that only see the skills list sent %d requests to the Daytona API: %v; want 0", n, f.srv.Counts())
	}

	mustRun(t, r, sid, "Load greet and run it.")
	mustContain(t, "the load's result", resultOf(t, f.st, sid, tools.NameLoadSkill)[0], `Loaded skill "greet" (`+sk.Digest+`)`, "read-only")
	mustContain(t, "the script's run", lastResult(t, f.st, sid), "name: greet", "hello v1", "555 .skills/greet\n", "555 .skills/greet/scripts/hello.sh",
		"444 .skills/greet/notes/usage.md", "READ-ONLY")
	rec, err := f.st.GetSessionSandbox(ctx, sid)
	if err != nil || rec.ProviderType != "daytona" {
		t.Fatalf("session sandbox %+v, %v", rec, err)
	}

	const upload = "POST /files/bulk-upload"
	uploads := f.srv.Count(upload)
	if uploads != 3 {
		t.Fatalf("the load uploaded %d files; want the skill's 3", uploads)
	}
	mustRun(t, r, sid, "Load it again.")
	mustContain(t, "the second load's result", resultOf(t, f.st, sid, tools.NameLoadSkill)[1], "already loaded in this sandbox")
	if n := f.srv.Count(upload); n != uploads {
		t.Fatalf("a second load in the same sandbox uploaded %d files", n-uploads)
	}
	// The sandbox removes its copy: the next load writes it again.
	sb, err := f.client.GetSandbox(ctx, rec.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := f.client.Execute(ctx, sb, daytona.ExecuteRequest{Command: "sh -c 'chmod -R u+w .skills && rm -rf .skills/greet'"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("removing the sandbox's copy: %+v, %v", res, err)
	}
	mustRun(t, r, sid, "Load it after removing it.")
	mustContain(t, "the load after the copy was removed", resultOf(t, f.st, sid, tools.NameLoadSkill)[2], `Loaded skill "greet" (`+sk.Digest+`)`)
	if n := f.srv.Count(upload); n != uploads+3 {
		t.Fatalf("the load after the copy was removed uploaded %d files; want 3", n-uploads)
	}

	// Applied again with a changed file, then the sandbox is deleted out of band: the
	// next load is a new sandbox with the new files.
	harnesstest.WriteSkillFile(t, dir, "scripts/hello.sh*", "#!/bin/sh\necho hello v2\n")
	sk2, blob2 := harnesstest.PublishSkill(t, dir)
	reapplySkill(t, f.st, sk2, blob2)
	r = f.runner(t, "skilled")
	mustRun(t, r, sid, "Load it once more.")
	mustContain(t, "the load after a re-apply", resultOf(t, f.st, sid, tools.NameLoadSkill)[3], "stays as it is", sk2.Digest)
	if err := f.client.DeleteSandbox(ctx, rec.SandboxID); err != nil {
		t.Fatal(err)
	}
	mustRun(t, r, sid, "Load it in the new sandbox.")
	mustContain(t, "the load in the new sandbox", resultOf(t, f.st, sid, tools.NameLoadSkill)[4], `Loaded skill "greet" (`+sk2.Digest+`)`)
	mustContain(t, "the script in the new sandbox", lastResult(t, f.st, sid), "hello v2")
	if rec2, err := f.st.GetSessionSandbox(ctx, sid); err != nil || rec2.Generation != 2 {
		t.Fatalf("session sandbox after the loss %+v, %v; want generation 2", rec2, err)
	}
}
