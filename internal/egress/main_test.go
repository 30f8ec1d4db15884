package egress_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// netdBinary is trueforge-netd built static for the tests that run it in a namespace.
var netdBinary string

func TestMain(m *testing.M) {
	// Re-executed inside a test's network namespace as the "Go client" of a sandbox.
	if u := os.Getenv("EGRESS_TEST_GOCLIENT_URL"); u != "" {
		os.Exit(goClient(u))
	}
	// Re-executed beside a benchmark as its CPU load (busyLoops, bench_test.go).
	if d := os.Getenv(busyEnv); d != "" {
		os.Exit(busy(d))
	}
	dir, err := os.MkdirTemp("", "egress-netd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	netdBinary = filepath.Join(dir, "trueforge-netd")
	build := exec.Command("go", "build", "-trimpath", "-o", netdBinary, "github.com/trueforge/terraform-provider-trueforge/cmd/trueforge-netd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building trueforge-netd: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// goClient is a plain Go program's view: proxy and CA from the environment only.
func goClient(u string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	if a := os.Getenv("EGRESS_TEST_AUTH"); a != "" {
		req.Header.Set("Authorization", a)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d %s", resp.StatusCode, b)
	if resp.StatusCode != 200 {
		return 1
	}
	return 0
}
