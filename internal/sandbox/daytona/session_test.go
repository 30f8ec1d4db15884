package daytona_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// A session exec answer without cmdId, which the daemon's SessionExecuteResponse requires
// (apps/daemon/pkg/toolbox/process/session/types.go:24, v0.190), is refused with an error
// naming the field, for a synchronous exec (200) and an async one (202) alike, and nothing
// is then asked of .../command//logs.
func TestSessionExecRefusesAnswerWithoutCmdID(t *testing.T) {
	t.Parallel()
	var followed atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/sb/process/session/s1/exec":
			w.Header().Set("Content-Type", "application/json")
			if body, _ := io.ReadAll(r.Body); strings.Contains(string(body), `"runAsync":true`) {
				w.WriteHeader(http.StatusAccepted)
				_, _ = w.Write([]byte(`{}`))
				return
			}
			_, _ = w.Write([]byte(`{"cmdId":"","exitCode":0,"output":"hi\n"}`))
		default:
			followed.Add(1)
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ts.Close)
	c := daytona.New(ts.URL, "k", daytona.WithRetryPolicy(fastRetry), daytona.WithPollInterval(5*time.Millisecond))
	sb := &daytona.Sandbox{ID: "sb", ToolboxProxyURL: ts.URL}
	ctx := testCtx(t)
	for _, async := range []bool{false, true} {
		res, err := c.SessionExec(ctx, sb, "s1", daytona.SessionExecuteRequest{Command: "echo hi", RunAsync: async})
		if err == nil || !strings.Contains(err.Error(), "cmdId") || !strings.Contains(err.Error(), "malformed") {
			t.Fatalf("async=%v: SessionExec of an answer without cmdId: %+v, %v; want a malformed-answer error naming cmdId", async, res, err)
		}
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("%d requests after the malformed answers; want none", n)
	}
}
