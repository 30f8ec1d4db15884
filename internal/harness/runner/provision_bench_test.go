package runner_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sandboxnet"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// The cost of provisioning a session's local sandbox (lifecycle Acquire: create and
// start it, then Release), by what the environment asks for. Baseline: no limits and no
// network. Limits: cpu 1, memory 1 GB and the default 3 GB disk, which as root is a
// sparse ext4 image made and loop-mounted per sandbox. Egress: limits plus an allow list,
// so a per-sandbox proxy (new CA, sealed state, socket) and netd inside. Report the
// others as ratios to the baseline of the same run.
func BenchmarkProvisionBaseline(b *testing.B) {
	benchProvision(b, func(e *store.Environment) { e.CPU, e.MemoryGB, e.DiskGB, e.BlockAll = 0, 0, 0, true }, false)
}

func BenchmarkProvisionLimits3GBDisk(b *testing.B) {
	benchProvision(b, func(e *store.Environment) { e.CPU, e.MemoryGB, e.DiskGB, e.BlockAll = 1, 1, 3, true }, false)
}

func BenchmarkProvisionLimitsAndEgress(b *testing.B) {
	benchProvision(b, func(e *store.Environment) {
		e.CPU, e.MemoryGB, e.DiskGB, e.BlockAll, e.AllowDomains = 1, 1, 3, false, []string{"api.example.com"}
	}, true)
}

func benchProvision(b *testing.B, envFn func(*store.Environment), network bool) {
	env := harnesstest.NewEnv(b)
	ctx := context.Background()
	e, err := env.Store.GetEnvironment(ctx, "default")
	if err != nil {
		b.Fatal(err)
	}
	envFn(&e)
	must(b, env.Store.UpdateEnvironment(ctx, e))
	cfg := lifecycle.Config{Store: env.Store, Runtimes: harnesstest.Source{C: env.Runtime}}
	if network {
		b.Setenv("TRUEFORGE_SECRET_KEY", "")
		x := sandboxnet.New(sandboxnet.Config{Store: env.Store, Dir: controlplane.New(env.Store).EgressDir(),
			Helper: netdHelper(b), Logger: slog.New(slog.DiscardHandler)})
		b.Cleanup(x.Close)
		cfg.Network = x
	}
	m := lifecycle.New(cfg)
	harnesstest.AddAgent(b, env.Store, "p", "default", harnesstest.AgentSpec{"model": harnesstest.Script(), "sandbox": harnesstest.Sandbox("default", 15, 60, 120)})
	a, err := agents.Load(ctx, env.Store, "p")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		sid := fmt.Sprintf("s-bench%d", i)
		must(b, env.Store.CreateSession(ctx, store.Session{ID: sid, Agent: "p", Owner: harnesstest.Owner}))
		b.StartTimer()
		l, err := m.Acquire(ctx, sid, a)
		if err != nil {
			b.Fatal(err)
		}
		l.Release(ctx)
		b.StopTimer()
		must(b, m.Delete(ctx, sid))
		b.StartTimer()
	}
}
