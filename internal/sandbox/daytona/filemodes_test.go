package daytona_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
)

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
