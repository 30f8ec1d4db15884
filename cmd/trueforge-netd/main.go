// Command trueforge-netd is the in-sandbox network helper: started by the sandbox runtime
// inside the sandbox's network namespace (only lo), it serves an HTTP proxy, a SOCKS5
// proxy and a synthetic DNS on loopback and carries every connection to the harness's
// egress proxy through the unix socket at /run/trueforge/egress/egress.sock (its directory
// is bound in, so a harness listening anew there is reached at once). See package
// internal/egress/netd. Once listening it closes the descriptor the runtime names in
// TRUEFORGE_EGRESS_READY_FD (sandbox.EgressReadyEnv), if any: the runtime runs the
// sandbox's commands only after that. It makes itself not dumpable as it starts, and
// the runtime starts it under the sandbox's seccomp filter minus the AF_UNIX rule. Build
// it static: CGO_ENABLED=0 go build ./cmd/trueforge-netd.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/egress/netd"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

func main() {
	// First thing, before anything listens: not dumpable, so that the sandbox's commands,
	// which run as the same user, can neither ptrace netd nor write its memory through
	// /proc (it may create AF_UNIX sockets, which they may not). execve made it dumpable
	// again, whatever its parent was.
	if err := netd.NotDumpable(); err != nil {
		fmt.Fprintln(os.Stderr, "trueforge-netd:", err)
		os.Exit(1)
	}
	socket := flag.String("socket", sandbox.EgressSocketPath, "the harness's egress unix socket")
	httpAddr := flag.String("http", fmt.Sprintf("127.0.0.1:%d", egress.HTTPProxyPort), "HTTP proxy listen address; empty disables")
	socksAddr := flag.String("socks", fmt.Sprintf("127.0.0.1:%d", egress.SOCKSPort), "SOCKS5 listen address; empty disables")
	dnsAddr := flag.String("dns", fmt.Sprintf("127.0.0.1:%d", egress.DNSPort), "DNS listen address (UDP and TCP); empty disables")
	prepare := flag.Bool("prepare", false, "prepare the current network namespace and exit: bring lo up and let unprivileged users bind ports from 53 (run by the runtime as root of the namespace, before starting the sandbox in it)")
	ready := flag.String("ready", "", "write this file once listening (for scripts and tests)")
	flag.Parse()

	logger := log.New(os.Stderr, "trueforge-netd: ", 0)
	if *prepare {
		if err := netd.PrepareNamespace(); err != nil {
			logger.Fatal(err)
		}
		return
	}
	if err := netd.LoopbackUp(); err != nil {
		logger.Print(err) // bubblewrap brings lo up; this matters only in a bare namespace
	}
	s := netd.New(netd.Config{Socket: *socket, HTTPAddr: *httpAddr, SOCKSAddr: *socksAddr, DNSAddr: *dnsAddr, Log: logger})
	dnsErr, err := s.Listen()
	if err != nil {
		logger.Fatal(err)
	}
	if dnsErr != nil {
		logger.Printf("%v; continuing without DNS (run trueforge-netd -prepare in the namespace first, so the sandbox user may bind port 53)", dnsErr)
	}
	if *ready != "" {
		if err := os.WriteFile(*ready, []byte("ready\n"), 0o644); err != nil {
			logger.Fatal(err)
		}
	}
	signalReady()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	_ = s.Serve(ctx)
}

// signalReady closes the descriptor the sandbox runtime named in sandbox.EgressReadyEnv:
// the runtime runs the sandbox's commands only once netd listens.
func signalReady() {
	v := os.Getenv(sandbox.EgressReadyEnv)
	if v == "" {
		return
	}
	os.Unsetenv(sandbox.EgressReadyEnv)
	if fd, err := strconv.Atoi(v); err == nil && fd > 2 {
		os.NewFile(uintptr(fd), "ready").Close()
	}
}
