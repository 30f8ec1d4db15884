package daytona_test

import (
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// TestBuildScriptRunsAsRootOnThePlatformImage (issue 24 M2): the platform image runs as
// daytona (images/sandbox/Dockerfile:96), so a build_script that needs root (a package
// manager, writes under /usr and /etc) builds only because the generated Dockerfile
// switches to root for it; the image still runs as daytona afterwards. On the old
// Dockerfile (no USER lines) the emulator fails this build as Docker would.
func TestBuildScriptRunsAsRootOnThePlatformImage(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := testCtx(t)
	b := daytona.NewBuilder(c)
	req := buildReq("apt-get install -y jq\nmkdir -p /usr/local/share/x\necho x > /etc/x\n")
	if err := b.StartBuild(ctx, req); err != nil {
		t.Fatal(err)
	}
	if st := waitBuild(t, ctx, b, req.ID); st.Status != sandbox.StatusReady {
		t.Fatalf("a root-only build_script on the platform image: %+v", st)
	}
	in, ok := srv.SnapshotInputs(req.ID)
	if !ok || in.User != daytona.PlatformImageUser {
		t.Fatalf("the snapshot runs as %q (ok %v), want %q:\n%s", in.User, ok, daytona.PlatformImageUser, in.Dockerfile)
	}
}

// TestEmulatorRunsBuildLinesAsTheirUser: the emulator follows a Dockerfile's USER lines
// from the base image's user and fails a RUN that needs root under another user, as
// `docker build` on the runner does (apps/runner/pkg/docker/image_build.go).
func TestEmulatorRunsBuildLinesAsTheirUser(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := testCtx(t)
	b := daytona.NewBuilder(c)
	for _, tc := range []struct {
		dockerfile string
		fail       bool
		user       string
	}{
		{"FROM platform\nRUN apt-get install -y jq\n", true, ""},
		{"FROM platform\nRUN echo x > /etc/x\n", true, ""},
		{"FROM platform\nRUN mkdir -p /usr/share/x\n", true, ""},
		{"FROM platform\nRUN echo x > /tmp/x && sudo apt-get install -y jq\n", false, "daytona"},
		{"FROM platform\nUSER root\nRUN apt-get install -y jq\nUSER app\n", false, "app"},
		{"FROM platform\nUSER root\nRUN true\nUSER daytona\nRUN echo x >> /etc/x\n", true, ""},
		{"FROM ubuntu:24.04\nRUN apt-get install -y jq\n", false, "root"},
		{"FROM ubuntu:24.04\nUSER app:app\nRUN touch /opt/x\n", true, ""},
	} {
		req := specReq(sandbox.SnapshotSpec{Dockerfile: tc.dockerfile}, "")
		if err := b.StartBuild(ctx, req); err != nil {
			t.Fatal(err)
		}
		st := waitBuild(t, ctx, b, req.ID)
		if tc.fail {
			if st.Status != sandbox.StatusFailed || !strings.Contains(st.Reason, "did not complete successfully") {
				t.Errorf("%q: want a failed build, got %+v", tc.dockerfile, st)
			}
			continue
		}
		if st.Status != sandbox.StatusReady {
			t.Errorf("%q: want ready, got %+v", tc.dockerfile, st)
			continue
		}
		if in, _ := srv.SnapshotInputs(req.ID); in.User != tc.user {
			t.Errorf("%q: image user %q, want %q", tc.dockerfile, in.User, tc.user)
		}
	}
}
