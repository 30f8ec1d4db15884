//go:build linux

package local

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// TestCheckEnvironmentRefusesBuildInputs: what the local backend cannot build is refused
// at plan time, naming the attribute and what to do.
func TestCheckEnvironmentRefusesBuildInputs(t *testing.T) {
	t.Parallel()
	b := &Backend{Probe: func(sandbox.Limits) []sandbox.UnenforcedLimit { return nil }}
	cases := []struct {
		name    string
		spec    sandbox.SnapshotSpec
		attr    string
		want    string
		warning bool
	}{
		{"gpu", sandbox.SnapshotSpec{Image: "platform", GPU: 1}, "gpu", "The local backend has no GPUs", false},
		{"gpu type", sandbox.SnapshotSpec{Image: "platform", GPUType: "H100"}, "gpu_type", "use a daytona sandbox provider", false},
		{"other base", sandbox.SnapshotSpec{Dockerfile: "FROM ubuntu:24.04\nRUN true\n"}, "dockerfile", `starts FROM "ubuntu:24.04"`, false},
		{"copy", sandbox.SnapshotSpec{Dockerfile: "FROM platform\nCOPY a /a\n"}, "dockerfile", "has a COPY instruction", false},
		{"no from", sandbox.SnapshotSpec{Dockerfile: "RUN true\n"}, "dockerfile", "first instruction is RUN", false},
		{"context", sandbox.SnapshotSpec{Dockerfile: "FROM platform\nRUN true\n", ContextHash: "abc"}, "build_context", "does not copy a build context", false},
		{"region", sandbox.SnapshotSpec{Image: "platform", Region: "eu"}, "region", "has no regions", false},
		{"registry", sandbox.SnapshotSpec{Image: "platform", Registry: "ghcr"}, "registry", "pulls no images", false},
		{"entrypoint", sandbox.SnapshotSpec{Image: "platform", Entrypoint: []string{"serve"}}, "entrypoint", "no entry process", false},
	}
	for _, c := range cases {
		ps := b.CheckEnvironment(context.Background(), sandbox.ProviderConfig{Name: "local"}, sandbox.EnvironmentSpec{Name: "e", Spec: c.spec})
		if len(ps) != 1 || ps[0].Attribute != c.attr || ps[0].Warning != c.warning || !strings.Contains(ps[0].Detail, c.want) {
			t.Errorf("%s: problems %+v; want one on %s containing %q (warning %v)", c.name, ps, c.attr, c.want, c.warning)
		}
	}
	ok := sandbox.SnapshotSpec{Dockerfile: "# tools\nFROM platform\nRUN apt-get update && \\\n    true\nrun echo lower-case keywords work\n"}
	if ps := b.CheckEnvironment(context.Background(), sandbox.ProviderConfig{}, sandbox.EnvironmentSpec{Spec: ok}); len(ps) != 0 {
		t.Errorf("FROM platform + RUN: %+v", ps)
	}
}

// TestBuildFromPlatformDockerfile: a `FROM platform` Dockerfile's RUN lines are the build
// script, each in its own shell, and a failing RUN fails the build; the builder refuses
// a Dockerfile it cannot build even without a plan.
func TestBuildFromPlatformDockerfile(t *testing.T) {
	t.Parallel()
	b, rel := newTestBuilder(t)
	startBuild(t, b, sandbox.BuildRequest{ID: "snap-df", Base: rel, Spec: sandbox.SnapshotSpec{
		Dockerfile: "FROM platform\nRUN cd /etc && echo one > df-one\nRUN pwd > /etc/df-two\n"}})
	requireReady(t, waitDone(t, b, "snap-df", 20*time.Second))
	if got := readLayerFile(t, b, "snap-df", "etc/df-one"); got != "one" {
		t.Errorf("etc/df-one = %q", got)
	}
	// The second RUN does not inherit the first one's cd.
	if got := readLayerFile(t, b, "snap-df", "etc/df-two"); got != "/root" {
		t.Errorf("etc/df-two = %q; want /root", got)
	}
	err := b.StartBuild(context.Background(), sandbox.BuildRequest{ID: "snap-df-bad", Base: rel,
		Spec: sandbox.SnapshotSpec{Dockerfile: "FROM debian:12\nRUN true\n"}})
	if err == nil || !strings.Contains(err.Error(), "dockerfile") {
		t.Fatalf("StartBuild of FROM debian:12: %v", err)
	}
}
