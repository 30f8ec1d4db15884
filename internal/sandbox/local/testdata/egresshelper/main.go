// Command egresshelper is the egress helper of the runtime's tests: it listens on
// 127.0.0.1:3128 inside a sandbox and pipes every connection to the unix socket bound
// at sandbox.EgressSocketPath. The real helper (an HTTP CONNECT proxy front) is built
// elsewhere; this one only proves the hook.
package main

import (
	"io"
	"log"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// listenDelay, set with -ldflags "-X main.listenDelay=500ms", makes the helper slow to
// start, to show that the runtime waits for it.
var listenDelay string

func main() {
	sock := os.Getenv("TRUEFORGE_EGRESS_SOCKET")
	if sock == "" {
		sock = sandbox.EgressSocketPath
	}
	if d, err := time.ParseDuration(listenDelay); err == nil {
		time.Sleep(d)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:3128")
	if err != nil {
		log.Fatal(err)
	}
	// Listening: tell the runtime, which waits for this before it runs commands.
	if fd, err := strconv.Atoi(os.Getenv(sandbox.EgressReadyEnv)); err == nil && fd > 2 {
		os.NewFile(uintptr(fd), "ready").Close()
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("unix", sock)
			if err != nil {
				return
			}
			defer u.Close()
			go func() { _, _ = io.Copy(u, c) }()
			_, _ = io.Copy(c, u)
		}()
	}
}
