package daytona_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
)

const routeSetPermissions = "POST /files/permissions"

// TestWriteFileModes: the daemon's upload keeps an existing file's mode and makes a new
// one 0644 (os.Create), so WriteFile sets a mode only when another is asked for: a new
// file gets the mode asked for, a rewrite with the default (0 or 0644) keeps the file's,
// any other mode replaces it, as the contract says on every backend. A write with the
// default is one upload; another mode adds one set-permissions call.
func TestWriteFileModes(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := testCtx(t)
	rt := &daytona.Runtime{C: c, WorkDir: "/workspace"}
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "modes", SnapshotID: readySnapshot(t, ctx, c, "true")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), "modes") })
	srv.ResetCounts()
	steps := []struct{ mode, want fs.FileMode }{{0o755, 0o755}, {0o644, 0o755}, {0, 0o755}, {0o600, 0o600}, {0o644, 0o600}}
	for _, st := range steps {
		if err := rt.WriteFile(ctx, "modes", "bin/run.sh", strings.NewReader("#!/bin/sh\n"), st.mode); err != nil {
			t.Fatal(err)
		}
		fi, err := rt.StatFile(ctx, "modes", "bin/run.sh")
		if err != nil || fi.Mode.Perm() != st.want {
			t.Fatalf("after WriteFile(%04o): %v %v; want %04o", st.mode, fi.Mode, err, st.want)
		}
	}
	if up, perm := srv.Count(routeBulkUpload), srv.Count(routeSetPermissions); up != len(steps) || perm != 2 {
		t.Fatalf("%d uploads and %d set-permissions calls for %d writes; want one upload each and a set-permissions call for the 2 writes of another mode", up, perm, len(steps))
	}
	if err := rt.WriteFile(ctx, "modes", "new.txt", strings.NewReader("x"), 0); err != nil {
		t.Fatal(err)
	}
	if fi, err := rt.StatFile(ctx, "modes", "new.txt"); err != nil || fi.Mode.Perm() != 0o644 {
		t.Fatalf("a new file written with mode 0: %v %v; want 0644", fi.Mode, err)
	}
}

// TestEmulatorSetFilePermissions: POST /files/permissions as set_file_permissions.go
// answers it: 200 with no body, a missing path query 400, a missing file 404, a mode
// that is not octal 400, every refusal with an empty body.
func TestEmulatorSetFilePermissions(t *testing.T) {
	t.Parallel()
	_, c, rt := interactiveSandbox(t)
	ctx := testCtx(t)
	if err := rt.WriteFile(ctx, "inter", "f", strings.NewReader("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb, err := c.GetSandbox(ctx, "inter")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		query string
		code  int
	}{
		{"?path=/workspace/f&mode=0711", 200},
		{"?mode=0755", 400},
		{"?path=/workspace/missing&mode=0755", 404},
		{"?path=/workspace/f&mode=9z", 400},
	} {
		code, body := toolboxPost(t, ctx, sb, "/files/permissions"+tc.query)
		if code != tc.code || body != "" {
			t.Fatalf("POST /files/permissions%s: %d %q; want %d and no body", tc.query, code, body, tc.code)
		}
	}
	if fi, err := rt.StatFile(ctx, "inter", "f"); err != nil || fi.Mode.Perm() != 0o711 {
		t.Fatalf("f: %v %v; want 0711", fi.Mode, err)
	}
}

// toolboxPost posts an empty body to a toolbox route of sb and returns the status and body.
func toolboxPost(t *testing.T, ctx context.Context, sb *daytona.Sandbox, route string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sb.ToolboxProxyURL+"/"+sb.ID+route, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+daytonatest.DefaultKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b.String()
}

// BenchmarkWriteFile: a small WriteFile through the runtime, the client and the
// emulator's toolbox, of mode 0644 (the file tools') and 0755 (a skill's script), at each
// of benchRoundTrips: the median and the toolbox requests each write takes (the upload,
// then setting the mode).
func BenchmarkWriteFile(b *testing.B) {
	for _, rtt := range benchRoundTrips {
		for _, mode := range []fs.FileMode{0o644, 0o755} {
			b.Run(fmt.Sprintf("rtt=%s/mode=%04o", rtt, mode), func(b *testing.B) {
				srv, _, rt := benchSandbox(b, rtt)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				benchCommands(b, srv, func() error {
					return rt.WriteFile(ctx, "inter", "notes.txt", strings.NewReader("hello\n"), mode)
				})
			})
		}
	}
}
