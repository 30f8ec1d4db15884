package daytona_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
)

// Upload routes as the emulator counts them.
const (
	routeBulkUpload = "POST /files/bulk-upload"
	routeUploadV2   = "POST /files/upload-v2"
	routeUploadV1   = "POST /files/upload"
)

// TestUploads: files written through the runtime (WriteFile, a plain command's stdin)
// arrive byte for byte, with their parents made and over an older file, on a daemon
// with /files/upload-v2 and on one without it (v0.190, self-hosted), through
// /files/bulk-upload, which both have.
func TestUploads(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []daytonatest.Option
	}{
		{"with upload-v2", nil},
		{"without upload-v2", []daytonatest.Option{daytonatest.WithoutUploadV2()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, c := setup(t, tc.opts...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rt := &daytona.Runtime{C: c, WorkDir: "/workspace"}
			if err := rt.Create(ctx, sandbox.CreateRequest{ID: "up", SnapshotID: readySnapshot(t, ctx, c, "true")}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rt.Delete(context.Background(), "up") })
			srv.ResetCounts()

			data := make([]byte, 300_000)
			for i := range data {
				data[i] = byte(i * 7)
			}
			for _, content := range [][]byte{[]byte("first version, longer than the second"), data} {
				if err := rt.WriteFile(ctx, "up", "a/b/c.bin", bytes.NewReader(content), 0o644); err != nil {
					t.Fatal(err)
				}
				got, err := rt.ReadFile(ctx, "up", "a/b/c.bin", 0)
				if err != nil || !bytes.Equal(got, content) {
					t.Fatalf("read back %d bytes (%v); want the %d written", len(got), err, len(content))
				}
			}
			if err := rt.WriteFile(ctx, "up", "empty", strings.NewReader(""), 0o600); err != nil {
				t.Fatal(err)
			}
			if fi, err := rt.StatFile(ctx, "up", "empty"); err != nil || fi.Size != 0 || fi.Mode.Perm() != 0o600 {
				t.Fatalf("empty file: %+v %v", fi, err)
			}
			res, err := rt.Exec(ctx, "up", sandbox.ExecRequest{Argv: []string{"wc", "-c"}, Stdin: bytes.NewReader(data)})
			if err != nil || strings.TrimSpace(string(res.Stdout)) != "300000" {
				t.Fatalf("stdin through an upload: %+v %v", res, err)
			}
			if n, v2, v1 := srv.Count(routeBulkUpload), srv.Count(routeUploadV2), srv.Count(routeUploadV1); n != 4 || v2 != 0 || v1 != 0 {
				t.Fatalf("%d bulk uploads, %d to upload-v2, %d to upload; want 4, 0 and 0", n, v2, v1)
			}
		})
	}
}

// TestUploadRefusedNamesTheFile: the daemon's bulk-upload answers a file it could not
// write with 400 {errors}; the client's error carries those messages.
func TestUploadRefusedNamesTheFile(t *testing.T) {
	t.Parallel()
	_, c, _ := interactiveSandbox(t)
	sb, err := c.GetSandbox(testCtx(t), "inter")
	if err != nil {
		t.Fatal(err)
	}
	err = c.UploadFile(testCtx(t), sb, "/etc/trueforge-refused", []byte("x"))
	if !hasStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "/etc/trueforge-refused: create:") {
		t.Fatalf("upload outside the emulator's workspace: %v; want 400 naming the file", err)
	}
}

// TestEmulatorUploadRoutes: the emulator answers each upload route as the daemon of
// its age does. v0.205 (the default): upload-v2 with a raw body, and /files/upload,
// which its toolbox dropped, with gin's 404 in plain text. v0.190 (WithoutUploadV2):
// upload-v2 with gin's 404, /files/upload with an empty 200.
func TestEmulatorUploadRoutes(t *testing.T) {
	t.Parallel()
	for _, old := range []bool{false, true} {
		var opts []daytonatest.Option
		if old {
			opts = append(opts, daytonatest.WithoutUploadV2())
		}
		_, c := setup(t, opts...)
		ctx := testCtx(t)
		rt := &daytona.Runtime{C: c, WorkDir: "/workspace"}
		if err := rt.Create(ctx, sandbox.CreateRequest{ID: "routes", SnapshotID: readySnapshot(t, ctx, c, "true")}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Delete(context.Background(), "routes") })
		sb, err := c.GetSandbox(ctx, "routes")
		if err != nil {
			t.Fatal(err)
		}
		post := func(route, query, ctype string, body io.Reader) (int, string) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, sb.ToolboxProxyURL+"/"+sb.ID+route+query, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+daytonatest.DefaultKey)
			req.Header.Set("Content-Type", ctype)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		code, body := post("/files/upload-v2", "?path=/workspace/v2.txt", "application/octet-stream", strings.NewReader("v2"))
		if old && (code != 404 || body != "404 page not found") {
			t.Fatalf("upload-v2 on an old daemon: %d %q; want gin's 404", code, body)
		}
		if !old && (code != 200 || !strings.Contains(body, `"path":"/workspace/v2.txt"`)) {
			t.Fatalf("upload-v2: %d %q", code, body)
		}
		var mp bytes.Buffer
		mp.WriteString("--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"v1.txt\"\r\n\r\nv1\r\n--b--\r\n")
		code, body = post("/files/upload", "?path=/workspace/v1.txt", "multipart/form-data; boundary=b", &mp)
		if !old {
			if code != 404 || body != "404 page not found" {
				t.Fatalf("upload on a v0.205 daemon: %d %q; want gin's 404", code, body)
			}
			if _, err := rt.StatFile(ctx, "routes", "v1.txt"); !errors.Is(err, sandbox.ErrNotFound) {
				t.Fatalf("v1.txt after a refused upload: %v; want ErrNotFound", err)
			}
			continue
		}
		if code != 200 || body != "" {
			t.Fatalf("upload (v0.190): %d %q; want 200 and no body", code, body)
		}
		if got, err := rt.ReadFile(ctx, "routes", "v1.txt", 0); err != nil || string(got) != "v1" {
			t.Fatalf("v1.txt: %q %v", got, err)
		}
	}
}
