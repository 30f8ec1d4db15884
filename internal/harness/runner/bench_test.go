package runner_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// The harness overhead of a turn: BenchmarkTurnScripted runs whole turns (session
// repair check, run row, user message, model step, usage, run end: every store write
// a turn makes) with the scripted model and no sandbox, ten turns per session;
// BenchmarkTurnModelOnly is the baseline, the scripted model's Generate alone on the
// same conversation. Their difference is what the harness adds per turn (target: 1 ms
// or less).

func benchAgent(b *testing.B) (*store.Store, *agents.Agent) {
	st := harnesstest.NewStore(b)
	harnesstest.SeedNoSandbox(b, st)
	var turns []map[string]any
	for i := 0; i < 10; i++ {
		turns = append(turns, text(fmt.Sprintf("Answer %d: the capital of France is Paris.", i)))
	}
	harnesstest.AddAgent(b, st, "bench", "default", harnesstest.AgentSpec{"model": harnesstest.Script(turns...)})
	a, err := agents.Load(context.Background(), st, "bench")
	if err != nil {
		b.Fatal(err)
	}
	return st, a
}

func BenchmarkTurnScripted(b *testing.B) {
	st, a := benchAgent(b)
	r := (&fixture{env: &harnesstest.Env{Store: st}}).runnerNoSandbox(b, a.Name)
	ctx := context.Background()
	var sid string
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for i := 0; i < b.N; i++ {
		if i%10 == 0 {
			var err error
			if sid, err = r.NewSession(ctx, harnesstest.Owner); err != nil {
				b.Fatal(err)
			}
		}
		out, err := r.Run(ctx, sid, "What is the capital of France?", nil)
		if err != nil || out.Status != store.RunCompleted {
			b.Fatalf("turn: %v %s", err, out.Status)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/turn")
}

// processCPU is the CPU time this process has used (user + system): on a shared
// machine a steadier measure of a turn's work than wall time, which counts the time
// other processes held the cores. BenchmarkAPITurnScripted reports the same.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkTurnModelOnly(b *testing.B) {
	_, a := benchAgent(b)
	m, err := a.NewModel(agents.ModelOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var msgs []model.Message
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%10 == 0 {
			msgs = msgs[:0]
		}
		msgs = append(msgs, model.Message{Role: model.RoleUser, Text: "What is the capital of France?"})
		resp, err := m.Generate(ctx, model.Request{System: "x", Messages: msgs}, func(string) {})
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, model.Message{Role: model.RoleAssistant, Text: resp.Text})
	}
}

// 100 sessions at once on the real local runtime: the even ones ask a question (no
// sandbox), the odd ones run a command (one sandbox each). Reports the sandboxes
// provisioned and fails on any error.
func BenchmarkConcurrentSessions100(b *testing.B) {
	f := newFixture(b)
	harnesstest.AddAgent(b, f.env.Store, "qa", "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(text("Paris.")), "sandbox": harnesstest.Sandbox("default", 15, 60, 120)})
	harnesstest.AddAgent(b, f.env.Store, "coder", "default", harnesstest.AgentSpec{
		"model": harnesstest.Script(exec("echo $GREETING from $(hostname)"), text("ran it")), "sandbox": harnesstest.Sandbox("default", 15, 60, 120)})
	qa, coder := f.runner(b, "qa"), f.runner(b, "coder")
	ctx := context.Background()
	var provisioned, failed atomic.Int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		creates := f.env.Runtime.Calls("Create")
		var wg sync.WaitGroup
		for s := 0; s < 100; s++ {
			wg.Add(1)
			go func(s int) {
				defer wg.Done()
				r := qa
				if s%2 == 1 {
					r = coder
				}
				sid, err := r.NewSession(ctx, harnesstest.Owner)
				if err != nil {
					failed.Add(1)
					b.Error(err)
					return
				}
				out, err := r.Run(ctx, sid, "go", nil)
				if err != nil || out.Status != store.RunCompleted {
					failed.Add(1)
					b.Errorf("session %d: %v %s", s, err, out.Status)
					return
				}
				res := results(b, f.env.Store, sid)
				if s%2 == 1 && (len(res) != 1 || res[0]["is_error"] == true) {
					failed.Add(1)
					b.Errorf("session %d: tool result %v", s, res)
				}
			}(s)
		}
		wg.Wait()
		provisioned.Add(int64(f.env.Runtime.Calls("Create") - creates))
		b.StopTimer()
		list, _ := f.env.Runtime.Runtime.List(ctx)
		for _, sb := range list {
			_ = f.env.Runtime.Runtime.Delete(ctx, sb.ID)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(provisioned.Load())/float64(b.N), "sandboxes/op")
	b.ReportMetric(float64(failed.Load())/float64(b.N), "errors/op")
}
