package provider

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Two teams apply to one control plane at the same moment, round after round: each apply
// must succeed (no lost update, no deadlock, no serialization failure surfacing as an
// error), identical build inputs planned by both at once must start exactly one build,
// and afterwards each team's state must match the database and plan empty.

// concurrentRounds is how many times the two teams apply at once.
const concurrentRounds = 10

// team is one team's working directory and provider block.
type team struct {
	name   string // prefix of the team's object names
	block  string // its provider block
	runner *cliRunner
}

// teamConfig is what team tm applies in round r. Every round changes every build input,
// so every environment bakes again:
//   - <team>-shared: the same build inputs in both teams (one build for both);
//   - <team>-own: inputs of this team only (one build each);
//   - lead/follow: team "a"'s environment moves to the round's inputs while team "b"'s
//     moves to the inputs "a" just left, so that one apply collects what the other is
//     about to use;
//   - an agent on <team>-shared whose instructions change every round.
func teamConfig(tm *team, r int) string {
	lead := fmt.Sprintf("echo lead %d > /usr/local/share/lead", r)
	name := "lead"
	if tm.name == "b" {
		lead = fmt.Sprintf("echo lead %d > /usr/local/share/lead", r-1)
		name = "follow"
	}
	return tm.block + fmt.Sprintf(`
resource "trueforge_environment" "shared" {
  name             = "%[1]s-shared"
  sandbox_provider = "local"
  build_script     = "echo shared %[2]d > /usr/local/share/round"
}

resource "trueforge_environment" "own" {
  name             = "%[1]s-own"
  sandbox_provider = "local"
  build_script     = "echo %[1]s %[2]d > /usr/local/share/round"
}

resource "trueforge_environment" "lead" {
  name             = "%[1]s-%[3]s"
  sandbox_provider = "local"
  build_script     = %[4]q
}

resource "trueforge_agent" "bot" {
  name         = "%[1]s-bot"
  model        = { provider = "scripted", script = "[]" }
  instructions = "round %[2]d"
  sandbox      = { enabled = true, environment = trueforge_environment.shared.name }
}
`, tm.name, r, name, lead)
}

// inParallel runs fn for every team at once and waits for all of them.
func inParallel(teams []*team, fn func(*team) (cliResult, error)) []cliResult {
	out := make([]cliResult, len(teams))
	errs := make([]error, len(teams))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, tm := range teams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i], errs[i] = fn(tm)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			out[i].code, out[i].stderr = -1, out[i].stderr+"\n"+err.Error()
		}
	}
	return out
}

// stateResources is the resources of a state file by address, with their attributes.
func stateResources(t *testing.T, state string) map[string]map[string]any {
	t.Helper()
	var s struct {
		Resources []struct {
			Type, Name string
			Instances  []struct {
				Attributes map[string]any `json:"attributes"`
			}
		}
	}
	if err := json.Unmarshal([]byte(state), &s); err != nil {
		t.Fatalf("reading the state: %v", err)
	}
	out := map[string]map[string]any{}
	for _, r := range s.Resources {
		if len(r.Instances) == 1 {
			out[r.Type+"."+r.Name] = r.Instances[0].Attributes
		}
	}
	return out
}

// checkStateMatchesDatabase compares what team tm's state says of its environments and
// agent with the rows of the database after round r.
func checkStateMatchesDatabase(t *testing.T, st *store.Store, tm *team, r int) {
	t.Helper()
	res := stateResources(t, tm.runner.read("terraform.tfstate"))
	for _, addr := range []string{"trueforge_environment.shared", "trueforge_environment.own", "trueforge_environment.lead"} {
		attrs := res[addr]
		if attrs == nil {
			t.Fatalf("team %s: %s is not in the state", tm.name, addr)
		}
		name, _ := attrs["name"].(string)
		env, err := st.GetEnvironment(t.Context(), name)
		if err != nil {
			t.Fatalf("team %s: %s (%s): %v", tm.name, addr, name, err)
		}
		if attrs["snapshot_id"] != env.SnapshotID || attrs["build_hash"] != env.BuildHash || attrs["build_script"] != env.BuildScript {
			t.Fatalf("team %s: %s in the state (snapshot %v, hash %v, script %v) differs from the database (snapshot %s, hash %s, script %s)",
				tm.name, addr, attrs["snapshot_id"], attrs["build_hash"], attrs["build_script"], env.SnapshotID, env.BuildHash, env.BuildScript)
		}
		snap, err := st.GetSnapshot(t.Context(), env.SnapshotID)
		if err != nil {
			t.Fatalf("team %s: environment %s references snapshot %s: %v", tm.name, name, env.SnapshotID, err)
		}
		if attrs["status"] != "Ready" || snap.Status != "Ready" {
			t.Fatalf("team %s: environment %s is %v in the state and its snapshot %s is %s in the database; want both Ready",
				tm.name, name, attrs["status"], snap.ID, snap.Status)
		}
	}
	a, err := st.GetAgent(t.Context(), tm.name+"-bot")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := agentspec.Decode(a.Spec)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("round %d", r)
	if spec.Instructions == nil || *spec.Instructions != want || res["trueforge_agent.bot"]["instructions"] != want {
		t.Fatalf("team %s: agent instructions in the database %v, in the state %v; want %q (an update was lost)",
			tm.name, spec.Instructions, res["trueforge_agent.bot"]["instructions"], want)
	}
}

// testConcurrentApplies runs the rounds. platform is the provider block of whoever
// publishes the sandbox provider; a and b are the two teams'; st reads the database.
func testConcurrentApplies(t *testing.T, providers providerFactories, platform, a, b string, st *store.Store) {
	testAccPreCheck(t)
	ctx := t.Context()
	p := newCLIRunner(t, providers)
	p.write("main.tf", platform+localProviderHCL)
	p.init()
	p.apply()

	teams := []*team{{name: "a", block: a, runner: newCLIRunner(t, providers)}, {name: "b", block: b, runner: newCLIRunner(t, providers)}}
	for _, tm := range teams {
		tm.runner.write("main.tf", teamConfig(tm, 1))
		tm.runner.init()
	}
	rebuilt := 0 // rounds in which b-follow's inputs were collected before b claimed them
	for r := 1; r <= concurrentRounds; r++ {
		before, err := st.CountBuilds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for _, tm := range teams {
			tm.runner.write("main.tf", teamConfig(tm, r))
		}
		for i, res := range inParallel(teams, func(tm *team) (cliResult, error) {
			return tm.runner.exec(tm.runner.cli, "apply", "-auto-approve", "-input=false", "-no-color")
		}) {
			if res.code != 0 {
				t.Fatalf("round %d: team %s's apply failed:\n%s", r, teams[i].name, res)
			}
		}
		after, err := st.CountBuilds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// shared (once for both teams), a-own, b-own and lead r; and b-follow's inputs
		// when they were built in this round: in round 1 (nobody had them), or when
		// a's apply found them unreferenced and collected them before b's claimed
		// them (garbage collection at that moment; b then builds them again, and must
		// not fail or end up on a removed snapshot).
		want := int64(4)
		follow, err := st.GetEnvironment(ctx, "b-follow")
		if err != nil {
			t.Fatal(err)
		}
		fs, err := st.GetSnapshot(ctx, follow.SnapshotID)
		if err != nil {
			t.Fatalf("round %d: b-follow's snapshot %s: %v", r, follow.SnapshotID, err)
		}
		if !fs.UpdatedAt.Before(start.Truncate(time.Millisecond)) {
			want++
			if r > 1 {
				rebuilt++
			}
		}
		if after-before != want {
			t.Errorf("round %d: %d builds started, want %d", r, after-before, want)
		}
		for _, tm := range teams {
			checkStateMatchesDatabase(t, st, tm, r)
		}
		for i, res := range inParallel(teams, func(tm *team) (cliResult, error) {
			return tm.runner.exec(tm.runner.cli, "plan", "-detailed-exitcode", "-input=false", "-no-color")
		}) {
			if res.code != 0 {
				t.Fatalf("round %d: team %s's plan after the apply is not empty:\n%s", r, teams[i].name, res)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	t.Logf("%d rounds: b-follow's inputs were collected by a's apply and built again in %d of %d rounds", concurrentRounds, rebuilt, concurrentRounds-1)
	for i, res := range inParallel(teams, func(tm *team) (cliResult, error) {
		return tm.runner.exec(tm.runner.cli, "destroy", "-auto-approve", "-input=false", "-no-color")
	}) {
		if res.code != 0 {
			t.Fatalf("team %s's destroy failed:\n%s", teams[i].name, res)
		}
	}
	for _, name := range []string{"a-shared", "a-own", "a-lead", "b-shared", "b-own", "b-follow"} {
		if _, err := st.GetEnvironment(ctx, name); err == nil {
			t.Errorf("environment %s is still there after its team's destroy", name)
		}
	}
}

func TestAccConcurrentApplies_sqlite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "trueforge.db")
	st, err := store.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	block := func(owner string) string {
		return fmt.Sprintf("provider \"trueforge\" {\n  database_url = %q\n  owner        = %q\n}\n", db, owner)
	}
	testConcurrentApplies(t, freshProviders, block("platform"), block("team_a"), block("team_b"), st)
}

// On PostgreSQL the teams are the roles alice and bob, each applying in its own
// transactions at once (SERIALIZABLE, retried on conflicts); alice also publishes the
// sandbox provider.
func TestAccConcurrentApplies_postgres(t *testing.T) {
	t.Parallel()
	f := newPGFixture(t)
	testConcurrentApplies(t, f.providers, f.providerBlock(f.alice), f.providerBlock(f.alice), f.providerBlock(f.bob), f.store())
}
