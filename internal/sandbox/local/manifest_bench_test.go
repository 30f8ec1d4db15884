package local

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// quickstartScript is examples/quickstart's python environment's build script (its
// build marker fixed).
const quickstartScript = `
printf '#!/bin/sh\necho hello from the python env\n' > /usr/local/bin/hello
chmod +x /usr/local/bin/hello
mkdir -p /etc/trueforge
echo "bench" > /etc/trueforge/build-marker
`

// BenchmarkManifest builds the quickstart environment's snapshot b.N times (each a new
// id) and takes each one's manifest as the build coordinator does once it is Ready: the
// extraction's median time against the build's, and the manifest's size.
func BenchmarkManifest(b *testing.B) {
	bl, rel := newTestBuilder(b)
	var builds, extracts []time.Duration
	var size, pkgs int
	ctx := context.Background()
	for i := range b.N {
		id := fmt.Sprintf("snap-bench-manifest-%d", i)
		start := time.Now()
		if err := bl.StartBuild(ctx, sandbox.BuildRequest{ID: id, Base: rel, Spec: sandbox.SnapshotSpec{Image: sandbox.PlatformImage, BuildScript: quickstartScript}}); err != nil {
			b.Fatal(err)
		}
		for {
			st, err := bl.BuildState(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if st.Status == sandbox.StatusFailed {
				b.Fatalf("build failed: %s", st.Reason)
			}
			if st.Status == sandbox.StatusReady {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		builds = append(builds, time.Since(start))
		start = time.Now()
		m, err := bl.Manifest(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		extracts = append(extracts, time.Since(start))
		size, pkgs = len(m.JSON()), len(m.Packages)
		_ = bl.DeleteSnapshot(ctx, id)
	}
	median := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	mb, me := median(builds), median(extracts)
	b.ReportMetric(float64(mb.Microseconds())/1000, "build-ms")
	b.ReportMetric(float64(me.Microseconds())/1000, "manifest-ms")
	b.ReportMetric(100*float64(me)/float64(mb), "manifest-%-of-build")
	b.ReportMetric(float64(size), "manifest-bytes")
	b.ReportMetric(float64(pkgs), "packages")
}
