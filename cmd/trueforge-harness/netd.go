package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/egress/netd"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// The harness is also the in-sandbox network helper (package netd), so a static
// harness (CGO_ENABLED=0) needs no second binary: the local runtime binds the helper at
// /run/trueforge/netd and starts it with no arguments (closing the descriptor named in
// sandbox.EgressReadyEnv once listening, as trueforge-netd does); -prepare is accepted
// as trueforge-netd takes it. netdArgs recognizes those invocations:
//
//   - started under the name netd or trueforge-netd (argv[0]): netd with the rest;
//   - `trueforge-harness netd [flags]`: the hidden subcommand;
//   - `trueforge-harness -prepare`: the namespace preparation, as trueforge-netd takes it.
//
// The flags are trueforge-netd's (see cmd/trueforge-netd).
func netdArgs(argv []string) ([]string, bool) {
	if len(argv) == 0 {
		return nil, false
	}
	switch filepath.Base(argv[0]) {
	case "netd", "trueforge-netd":
		return argv[1:], true
	}
	if len(argv) > 1 {
		switch argv[1] {
		case "netd":
			return argv[2:], true
		case "-prepare", "--prepare":
			return argv[1:], true
		}
	}
	return nil, false
}

// runNetd is trueforge-netd's main on args; it returns the exit status.
func runNetd(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("netd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", sandbox.EgressSocketPath, "the harness's egress unix socket")
	httpAddr := fs.String("http", fmt.Sprintf("127.0.0.1:%d", egress.HTTPProxyPort), "HTTP proxy listen address; empty disables")
	socksAddr := fs.String("socks", fmt.Sprintf("127.0.0.1:%d", egress.SOCKSPort), "SOCKS5 listen address; empty disables")
	dnsAddr := fs.String("dns", fmt.Sprintf("127.0.0.1:%d", egress.DNSPort), "DNS listen address (UDP and TCP); empty disables")
	prepare := fs.Bool("prepare", false, "prepare the current network namespace and exit (lo up, unprivileged ports from 53)")
	ready := fs.String("ready", "", "write this file once listening")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := log.New(stderr, "trueforge-netd: ", 0)
	if *prepare {
		if err := netd.PrepareNamespace(); err != nil {
			logger.Print(err)
			return 1
		}
		return 0
	}
	if err := netd.LoopbackUp(); err != nil {
		logger.Print(err) // bubblewrap brings lo up; this matters only in a bare namespace
	}
	s := netd.New(netd.Config{Socket: *socket, HTTPAddr: *httpAddr, SOCKSAddr: *socksAddr, DNSAddr: *dnsAddr, Log: logger})
	dnsErr, err := s.Listen()
	if err != nil {
		logger.Print(err)
		return 1
	}
	if dnsErr != nil {
		logger.Printf("%v; continuing without DNS (run netd -prepare in the namespace first)", dnsErr)
	}
	if *ready != "" {
		if err := os.WriteFile(*ready, []byte("ready\n"), 0o644); err != nil {
			logger.Print(err)
			return 1
		}
	}
	signalReady()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	_ = s.Serve(ctx)
	return 0
}

// signalReady closes the descriptor the sandbox runtime named in sandbox.EgressReadyEnv:
// the runtime runs the sandbox's commands only once netd listens (or after 5 s).
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
