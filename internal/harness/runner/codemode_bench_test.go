package runner_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/codemode"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/mcptools"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// What the bridge adds to an MCP call: BenchmarkCodeModeBridge runs, per iteration, a
// Python script on the warm local sandbox that makes 100 calls to a real MCP server on
// loopback, timing each call from the script's side; and, as the baseline in the same
// iteration, 100 direct calls of the same tool from the harness (mcptools, the path a
// model's own MCP call takes). Reported: the p50 of each, their difference (the bridge's
// cost per call: target 2 ms or less), and the wall time of the whole 100-call script
// (the run_code call: start of the interpreter, the stubs, the calls, the output).
func BenchmarkCodeModeBridge(b *testing.B) {
	f := newFixture(b)
	kb := newKB(b, "tok")
	script := `import time, json
lat = []
for i in range(100):
    t = time.perf_counter()
    kb.population(city="c%d" % i)
    lat.append(time.perf_counter() - t)
print("LAT " + json.dumps(lat))`
	turns := []map[string]any{runCode(codemode.Python, "print('warm')"), text("warm")}
	for i := 0; i < b.N; i++ {
		turns = append(turns, runCode(codemode.Python, script), text("done"))
	}
	r, _ := f.codeAgent(b, "bench", kb, map[string]any{"max_calls": 1000}, harnesstest.Owner, nil, turns...)
	ctx := context.Background()
	sid, _ := r.NewSession(ctx, harnesstest.Owner)
	mustRun(b, r, sid, "warm up") // provisions the sandbox and connects the MCP session
	direct := mcptools.New(r.Agent.Spec.MCPServers, mcptools.Options{User: harnesstest.Owner, Agent: "bench", Credentials: r.Agent.Authority(nil, harnesstest.Owner)})
	defer direct.Close()
	direct.Descriptors(ctx)
	var viaScript, viaHarness []float64
	var wall time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < 100; j++ {
			t := time.Now()
			if _, err := direct.CallValue(ctx, mcptools.Origin{}, "kb__population", map[string]any{"city": "d"}); err != nil {
				b.Fatal(err)
			}
			viaHarness = append(viaHarness, time.Since(t).Seconds())
		}
		t := time.Now()
		out, err := r.Run(ctx, sid, "100 calls", nil)
		if err != nil || out.Status != store.RunCompleted {
			b.Fatalf("run: %v %v", err, out.Status)
		}
		wall += time.Since(t)
		res := results(b, f.env.Store, sid)
		text := res[len(res)-1]["text"].(string)
		_, js, ok := strings.Cut(text, "LAT ")
		var lat []float64
		if !ok || json.Unmarshal([]byte(strings.TrimSpace(js)), &lat) != nil || len(lat) != 100 {
			b.Fatalf("the script's output %q", text)
		}
		viaScript = append(viaScript, lat...)
	}
	b.StopTimer()
	p50 := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2] * 1e3
	}
	b.ReportMetric(p50(viaHarness), "direct-p50-ms")
	b.ReportMetric(p50(viaScript), "script-p50-ms")
	b.ReportMetric(p50(viaScript)-p50(viaHarness), "added-p50-ms")
	b.ReportMetric(float64(wall.Milliseconds())/float64(b.N), "script100-ms")
}
