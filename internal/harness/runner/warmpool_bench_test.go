package runner_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/backend"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Daytona's figures as measured by others (issue 28): a create takes about 1.5 s, and
// every request to the API or a sandbox's toolbox about 20 ms.
const (
	benchDaytonaCreate  = 1500 * time.Millisecond
	benchDaytonaRequest = 20 * time.Millisecond
)

// BenchmarkFirstSandboxCall: a session's first sandbox call, Acquire and its first
// command (`true`), with the environment's warm pool (a member made beforehand, outside
// the timer, as `serve` does) against without one (a create), on the local backend and
// on the Daytona emulator with Daytona's create and request latencies. Reports the p50 of
// the call and of its Acquire alone and, on the emulator, the API and toolbox requests
// of the call.
func BenchmarkFirstSandboxCall(b *testing.B) {
	for _, backendName := range []string{"local", "daytona"} {
		for _, pool := range []bool{false, true} {
			name := backendName + "/cold"
			if pool {
				name = backendName + "/pool"
			}
			b.Run(name, func(b *testing.B) {
				var fx poolBench
				if backendName == "local" {
					fx = localPoolBench(b)
				} else {
					fx = daytonaPoolBench(b)
				}
				fx.run(b, pool)
			})
		}
	}
}

// poolBench is a control plane with environment env and agent "p" on it.
type poolBench struct {
	st  *store.Store
	m   *lifecycle.Manager
	env string
	srv *daytonatest.Server // nil on the local backend
}

func localPoolBench(b *testing.B) poolBench {
	env := harnesstest.NewEnv(b)
	ctx := context.Background()
	e, err := env.Store.GetEnvironment(ctx, "default")
	must(b, err)
	e.CPU, e.MemoryGB, e.DiskGB, e.BlockAll = 0, 0, 0, true
	must(b, env.Store.UpdateEnvironment(ctx, e))
	m := lifecycle.New(lifecycle.Config{Store: env.Store, Runtimes: harnesstest.Source{C: env.Runtime}})
	return poolBench{st: env.Store, m: m, env: "default"}
}

func daytonaPoolBench(b *testing.B) poolBench {
	return daytonaPool(b, daytonatest.WithTransitionDelay("creating", benchDaytonaCreate),
		daytonatest.WithRequestLatency(benchDaytonaRequest), daytonatest.WithToolboxLatency(benchDaytonaRequest))
}

// daytonaPool is a control plane on the Daytona emulator (started with opts) with
// environment "dtenv", whose network the backend enforces.
func daytonaPool(b testing.TB, opts ...daytonatest.Option) poolBench {
	harnesstest.RequireSandboxTools(b)
	ctx := context.Background()
	srv := daytonatest.NewServer(b, opts...)
	st := harnesstest.NewStore(b)
	b.Setenv(secretbox.KeyEnv, "")
	box, err := secretbox.Load("", filepath.Join(st.Dir(), "secret.key"))
	must(b, err)
	sealed, err := box.Seal([]byte(daytonatest.DefaultKey), "sandbox_provider/dt")
	must(b, err)
	must(b, st.CreateSandboxProvider(ctx, store.SandboxProvider{Name: "dt", Type: "daytona", APIURL: srv.URL(), APIKeyEnc: sealed,
		Owner: harnesstest.Owner, Status: "Ready"}))
	c := daytona.New(srv.URL(), daytonatest.DefaultKey, daytona.WithPollInterval(5*time.Millisecond))
	spec := sandbox.SnapshotSpec{Image: sandbox.PlatformImage, CPU: 1, MemoryGB: 1, DiskGB: 3}
	snap := sandbox.SnapshotID(spec.BuildHash())
	must(b, daytona.NewBuilder(c).StartBuild(ctx, sandbox.BuildRequest{ID: snap, Spec: spec}))
	if _, err := c.WaitSnapshot(ctx, snap); err != nil {
		b.Fatal(err)
	}
	if _, _, err := st.ClaimSnapshot(ctx, store.Snapshot{ID: snap, Provider: "dt", BuildHash: spec.BuildHash(), Spec: "{}"}, "Building", "Failed"); err != nil {
		b.Fatal(err)
	}
	must(b, st.SetSnapshotState(ctx, snap, sandbox.StatusReady, "", ""))
	must(b, st.CreateEnvironment(ctx, store.Environment{ID: "env-dt", Name: "dtenv", Provider: "dt", Owner: harnesstest.Owner,
		Image: sandbox.PlatformImage, CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: spec.BuildHash(), SnapshotID: snap,
		Env: map[string]string{"GREETING": "hello"}, AllowDomains: []string{"api.example.com"}}))
	rts := backend.New(controlplane.New(st))
	rts.Backends[daytona.Type] = &daytona.Backend{Options: []daytona.Option{daytona.WithPollInterval(5 * time.Millisecond)}}
	b.Cleanup(func() {
		members, _ := st.ListPoolSandboxes(context.Background())
		for _, p := range members {
			_ = c.DeleteSandbox(context.Background(), p.SandboxID)
		}
	})
	return poolBench{st: st, m: lifecycle.New(lifecycle.Config{Store: st, Runtimes: rts}), env: "dtenv", srv: srv}
}

// run times b.N first calls of new sessions; with pool, the environment keeps a pool of
// one, refilled before each call outside the timer.
func (fx poolBench) run(b *testing.B, pool bool) {
	ctx := context.Background()
	if pool {
		e, err := fx.st.GetEnvironment(ctx, fx.env)
		must(b, err)
		e.Settings.WarmPool = &store.WarmPool{Size: 1, MaxAgeSeconds: 3600}
		must(b, fx.st.UpdateEnvironment(ctx, e))
	}
	harnesstest.AddAgent(b, fx.st, "p", fx.env, harnesstest.AgentSpec{"model": harnesstest.Script(), "sandbox": harnesstest.Sandbox(fx.env, 15, 60, 120)})
	a, err := agents.Load(ctx, fx.st, "p")
	must(b, err)
	var took, acquired []time.Duration
	requests := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		sid := fmt.Sprintf("s-pool%d", i)
		must(b, fx.st.CreateSession(ctx, store.Session{ID: sid, Agent: "p", Owner: harnesstest.Owner}))
		if pool {
			if trs, err := fx.m.KeepPools(ctx); err != nil || len(trs) > 0 && trs[len(trs)-1].Err != nil {
				b.Fatalf("keeping the pool: %v %+v", err, trs)
			}
		}
		before := fx.requests()

		b.StartTimer()
		began := time.Now()
		l, err := fx.m.Acquire(ctx, sid, a)
		if err != nil {
			b.Fatal(err)
		}
		acquired = append(acquired, time.Since(began))
		res, err := l.Runtime.Exec(ctx, l.Record.SandboxID, sandbox.ExecRequest{Argv: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("first command: %+v, %v", res, err)
		}
		l.Release(ctx)
		took = append(took, time.Since(began))
		b.StopTimer()
		requests += fx.requests() - before

		if strings.HasPrefix(l.Record.SandboxID, lifecycle.PoolIDPrefix) != pool {
			b.Fatalf("session %s got sandbox %s (pool %v)", sid, l.Record.SandboxID, pool)
		}
		must(b, fx.m.Delete(ctx, sid))
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(took)
	slices.Sort(acquired)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1e3, "p50-ms")
	b.ReportMetric(float64(acquired[len(acquired)/2].Microseconds())/1e3, "acquire-p50-ms")
	if fx.srv != nil {
		b.ReportMetric(float64(requests)/float64(b.N), "requests/call")
	}
}

// requests is how many API and toolbox requests the emulator has answered (0 locally).
func (fx poolBench) requests() int {
	if fx.srv == nil {
		return 0
	}
	n := 0
	for _, c := range fx.srv.Counts() {
		n += c
	}
	return n
}
