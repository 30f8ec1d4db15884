// Package everythingtest gives tests a real, foreign MCP server to talk to: the MCP
// reference server "everything" (the npm package @modelcontextprotocol/server-everything,
// TypeScript SDK), run by node over streamable HTTP on a loopback port of its own for
// each Start. Tests of the MCP client meet there a peer the project did not write: its
// elicitation, sampling and progress requests (the tools trigger-elicitation-request,
// trigger-sampling-request and trigger-long-running-operation; the first two exist only
// for a client that advertises the capability).
//
// The package is found at TRUEFORGE_SERVER_EVERYTHING (its dist/index.js), else in the
// tool cache where scripts/ensure-server-everything.sh installs it. Without it, or
// without node, the tests that need it are skipped, unless
// TRUEFORGE_REQUIRE_SERVER_EVERYTHING=1 (set by scripts/test.sh, which installs it),
// where they fail: in `make test` nothing is skipped.
package everythingtest

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/testpeer"
)

// Version is the package's version that scripts/ensure-server-everything.sh installs;
// the lookup in the tool cache is for it.
const Version = "2026.8.31"

// Env names the server's dist/index.js, to use instead of the tool cache's.
const Env = "TRUEFORGE_SERVER_EVERYTHING"

// RequireEnv, set to 1, makes a missing server a failure instead of a skip.
const RequireEnv = "TRUEFORGE_REQUIRE_SERVER_EVERYTHING"

// Path is the URL path of the server's streamable HTTP endpoint
// (dist/transports/streamableHttp.js).
const Path = "/mcp"

// readyTimeout bounds the wait for the server to listen (about half a second, usually).
const readyTimeout = 15 * time.Second

// readyPrefix starts the line that preload writes to stderr once the server listens.
const readyPrefix = "everythingtest: listening on "

// preload runs in node before the server (node --import). The server listens on
// process.env.PORT on every interface and has no setting for the address, so preload
// binds its listener to 127.0.0.1 (PORT=0: a free port, so no race for one), reports the
// address on stderr, and ends node when its stdin closes: when the test process ends,
// however it ends, the server goes with it.
const preload = `import net from "node:net";
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
	if (typeof args[0] === "number" || (typeof args[0] === "string" && /^[0-9]+$/.test(args[0]))) {
		args[0] = { port: Number(args[0]) };
	}
	if (args[0] !== null && typeof args[0] === "object" && "port" in args[0]) {
		args[0] = { ...args[0], host: "127.0.0.1" };
		this.once("listening", () => {
			const a = this.address();
			process.stderr.write("` + readyPrefix + `" + a.address + ":" + a.port + "\n");
		});
	}
	return listen.apply(this, args);
};
process.stdin.on("end", () => process.exit(0));
process.stdin.on("error", () => process.exit(0));
process.stdin.resume();
`

// Start starts the server for tb and returns its streamable HTTP endpoint
// (http://127.0.0.1:PORT/mcp). Each call is a server of its own, with its own sessions;
// it is killed, with its process group, when tb ends. Start skips tb when there is no
// server or no node to run it, or fails it: under TRUEFORGE_REQUIRE_SERVER_EVERYTHING=1,
// or when TRUEFORGE_SERVER_EVERYTHING names a file that is not there.
func Start(tb testing.TB) string {
	tb.Helper()
	entry, node, err := find()
	if err != nil {
		testpeer.Missing(tb, testpeer.Peer{Name: "MCP server everything", Env: Env, RequireEnv: RequireEnv,
			HowTo: "install it with scripts/ensure-server-everything.sh (needs node and npm), or set " + Env + " to its dist/index.js"}, err)
	}

	out := &output{ready: make(chan string, 1)}
	cmd := exec.Command(node, "--import", "data:text/javascript;base64,"+base64.StdEncoding.EncodeToString([]byte(preload)),
		entry, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT=0")
	cmd.Stdout = out
	cmd.Stderr = stderrWriter{out}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The write end stays open in this process until the cleanup, and closes with it.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatalf("starting the MCP server everything: %v", err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting the MCP server everything (%s %s): %v", node, entry, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		select {
		case <-exited: // reaped: its group's id may be another's by now
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		stdin.Close()
		<-exited
		if tb.Failed() {
			tb.Logf("the MCP server everything's output:\n%s", out.String())
		}
	})

	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case addr := <-out.ready:
		host, _, err := net.SplitHostPort(addr)
		if err != nil || host != "127.0.0.1" {
			tb.Fatalf("the MCP server everything listens on %q, not on 127.0.0.1; its output:\n%s", addr, out.String())
		}
		return "http://" + addr + Path
	case <-exited:
		tb.Fatalf("the MCP server everything exited before it listened (%v); its output:\n%s", waitErr, out.String())
	case <-timer.C:
		tb.Fatalf("the MCP server everything did not listen within %v; its output:\n%s", readyTimeout, out.String())
	}
	return ""
}

// find returns the server's dist/index.js and node's path, or why there are none.
func find() (entry, node string, err error) {
	entry = os.Getenv(Env)
	if entry == "" {
		cache := os.Getenv("TRUEFORGE_TOOLS_DIR")
		if cache == "" {
			// As scripts/toolcache.sh has it (not os.UserCacheDir, which differs off Linux).
			base := os.Getenv("XDG_CACHE_HOME")
			if base == "" {
				home, err := os.UserHomeDir()
				if err != nil {
					return "", "", fmt.Errorf("no tool cache: %w", err)
				}
				base = filepath.Join(home, ".cache")
			}
			cache = filepath.Join(base, "trueforge-tools")
		}
		entry = filepath.Join(cache, "server-everything-"+Version, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	}
	if _, err := os.Stat(entry); err != nil {
		return "", "", err
	}
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", err
	}
	return entry, node, nil
}

// maxOutput caps what output keeps of the server's output: its tail.
const maxOutput = 64 << 10

// output keeps the tail of the server's stdout and stderr, and sends the address on
// ready when stderr reports it.
type output struct {
	mu      sync.Mutex
	buf     []byte
	line    []byte // stderr's unfinished line
	ready   chan string
	reached bool
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.keep(p)
	return len(p), nil
}

func (o *output) keep(p []byte) {
	o.buf = append(o.buf, p...)
	if len(o.buf) > maxOutput {
		o.buf = append(o.buf[:0], o.buf[len(o.buf)-maxOutput:]...)
	}
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.buf)
}

// stderrWriter is output's writer for stderr, which also looks for preload's line.
type stderrWriter struct{ o *output }

func (w stderrWriter) Write(p []byte) (int, error) {
	o := w.o
	o.mu.Lock()
	defer o.mu.Unlock()
	o.keep(p)
	if o.reached {
		return len(p), nil
	}
	o.line = append(o.line, p...)
	for {
		i := bytes.IndexByte(o.line, '\n')
		if i < 0 {
			break
		}
		l := string(o.line[:i])
		o.line = o.line[i+1:]
		if addr, ok := strings.CutPrefix(l, readyPrefix); ok {
			o.reached, o.line = true, nil
			o.ready <- addr
			break
		}
	}
	if len(o.line) > maxOutput {
		o.line = nil
	}
	return len(p), nil
}
