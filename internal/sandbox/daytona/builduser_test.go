package daytona_test

import (
	"encoding/base64"
	"fmt"
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
	srv, _, ctx, b := setupBuilder(t)
	req := buildReq("apt-get install -y jq\nmkdir -p /usr/local/share/x\necho x > /etc/x\n")
	if st := build(t, ctx, b, req); st.Status != sandbox.StatusReady {
		t.Fatalf("a root-only build_script on the platform image: %+v", st)
	}
	in, ok := srv.SnapshotInputs(req.ID)
	if !ok || in.User != daytona.PlatformImageUser {
		t.Fatalf("the snapshot runs as %q (ok %v), want %q:\n%s", in.User, ok, daytona.PlatformImageUser, in.Dockerfile)
	}
}

// TestPlatformDockerfileRunsAsRoot (issue 24 M2): a user's Dockerfile on `FROM
// platform` runs its instructions as root, as on the local backend, and its sandboxes as
// the platform image's user unless the final stage sets a USER of its own.
func TestPlatformDockerfileRunsAsRoot(t *testing.T) {
	t.Parallel()
	srv, _, ctx, b := setupBuilder(t)
	// Every build ends by making the workspace its user's (issue 24 M1): with a RUN as
	// root when the Dockerfile says who the user is, and a WORKDIR in any case.
	ws := func(user string) string {
		if user == "" {
			return "WORKDIR /workspace\n"
		}
		return "USER root\nRUN mkdir -p /workspace && chown -R " + user + " /workspace\nUSER " + user + "\nWORKDIR /workspace\n"
	}
	for _, tc := range []struct{ dockerfile, user, text string }{
		{"FROM platform\nRUN apt-get install -y jq && echo x > /etc/x\n", "daytona",
			"FROM " + daytona.DefaultReleaseImage + "\nUSER root\nRUN apt-get install -y jq && echo x > /etc/x\nUSER daytona\n" + ws("daytona")},
		{"FROM platform AS base\nRUN touch /opt/x\nUSER app\n", "app",
			"FROM " + daytona.DefaultReleaseImage + " AS base\nUSER root\nRUN touch /opt/x\nUSER app\n" + ws("app")},
		{"FROM platform\nUSER root\nRUN touch /opt/x", "root",
			"FROM " + daytona.DefaultReleaseImage + "\nUSER root\nUSER root\nRUN touch /opt/x\n" + ws("")},
		{"FROM platform AS b\nRUN true\nFROM ubuntu:24.04\nRUN apt-get install -y jq\n", "root",
			"FROM " + daytona.DefaultReleaseImage + " AS b\nUSER root\nRUN true\nFROM ubuntu:24.04\nRUN apt-get install -y jq\n" + ws("")},
	} {
		req := specReq(sandbox.SnapshotSpec{Dockerfile: tc.dockerfile}, "")
		if st := build(t, ctx, b, req); st.Status != sandbox.StatusReady {
			t.Errorf("%q: want ready, got %+v", tc.dockerfile, st)
			continue
		}
		in, _ := srv.SnapshotInputs(req.ID)
		if in.User != tc.user || in.Dockerfile != tc.text {
			t.Errorf("%q: image user %q, want %q; sent:\n%s\nwant:\n%s", tc.dockerfile, in.User, tc.user, in.Dockerfile, tc.text)
		}
	}
}

// TestEmulatorRunsBuildLinesAsTheirUser: the emulator follows a Dockerfile's USER lines
// from the base image's user and fails a RUN that needs root under another user, as
// `docker build` on the runner does (apps/runner/pkg/docker/image_build.go). The
// Dockerfiles go to the API as written (no `FROM platform` rewriting).
func TestEmulatorRunsBuildLinesAsTheirUser(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := testCtx(t)
	img := daytona.DefaultReleaseImage
	for i, tc := range []struct {
		dockerfile string
		fail       bool
		user       string
	}{
		{"FROM " + img + "\nRUN apt-get install -y jq\n", true, ""},
		{"FROM " + img + "\nRUN echo x > /etc/x\n", true, ""},
		{"FROM " + img + "\nRUN mkdir -p /usr/share/x\n", true, ""},
		{"FROM " + img + "\nRUN echo x > /tmp/x && sudo apt-get install -y jq && mkdir -p /usr/local/lib/y\n", false, "daytona"},
		{"FROM " + img + "\nUSER root\nRUN apt-get install -y jq\nUSER app\n", false, "app"},
		{"FROM " + img + "\nUSER root\nRUN true\nUSER daytona\nRUN echo x >> /etc/x\n", true, ""},
		{"FROM " + img + "\nRUN echo " + base64.StdEncoding.EncodeToString([]byte("touch /etc/x\n")) + " | base64 -d > /tmp/s.sh && sh -e /tmp/s.sh\n", true, ""},
		{"FROM ubuntu:24.04\nRUN apt-get install -y jq\n", false, "root"},
		{"FROM ubuntu:24.04\nUSER app:app\nRUN touch /opt/x\n", true, ""},
	} {
		name := fmt.Sprintf("users-%d", i)
		if _, err := c.CreateSnapshot(ctx, daytona.CreateSnapshotRequest{Name: name,
			BuildInfo: &daytona.BuildInfo{DockerfileContent: tc.dockerfile}}); err != nil {
			t.Fatal(err)
		}
		s, err := c.WaitSnapshot(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if tc.fail {
			if s.State != daytona.SnapshotBuildFailed || !strings.Contains(s.ErrorReason, "did not complete successfully") {
				t.Errorf("%q: want a failed build, got %s %q", tc.dockerfile, s.State, s.ErrorReason)
			}
			continue
		}
		if s.State != daytona.SnapshotActive {
			t.Errorf("%q: want active, got %s %q", tc.dockerfile, s.State, s.ErrorReason)
			continue
		}
		if in, _ := srv.SnapshotInputs(name); in.User != tc.user {
			t.Errorf("%q: image user %q, want %q", tc.dockerfile, in.User, tc.user)
		}
	}
}
