package netd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress/wire"
)

// Main is the netd command, the one entry point of both binaries that serve as the
// helper: cmd/trueforge-netd and cmd/trueforge-harness (which the sandbox runtime starts
// as netd by default, see sandboxnet.LocateHelper). args are the command line without
// argv[0]; it returns the exit status: 0, 1 on failure, 2 on a bad command line.
//
// It first makes the process not dumpable, before it parses a flag, opens a socket or
// signals the runtime: in a sandbox netd runs as the same user as the commands and,
// unlike them, may create AF_UNIX sockets, so as long as it is dumpable a command can
// open its /proc/<pid>/mem and write code into it. execve made the process dumpable
// again, whatever its parent was, and the runtime starts the commands once netd signals
// that it listens: done later, there would be a window, and a second binary that forgot
// it would run dumpable (as the harness once did). Main is for a process's main only:
// the caller stays not dumpable.
//
// Flags: -socket (the harness's egress unix socket), -http, -socks, -dns (listen
// addresses; empty disables), -prepare (prepare the current network namespace and exit)
// and -ready (a file to write once listening). Once listening it also closes the
// descriptor named in wire.ReadyEnv, if any, and then serves until SIGTERM or
// SIGINT.
func Main(args []string, stderr io.Writer) int {
	if err := NotDumpable(); err != nil {
		fmt.Fprintln(stderr, "trueforge-netd:", err)
		return 1
	}
	fs := flag.NewFlagSet("trueforge-netd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", wire.SocketPath, "the harness's egress unix socket")
	httpAddr := fs.String("http", fmt.Sprintf("127.0.0.1:%d", wire.HTTPProxyPort), "HTTP proxy listen address; empty disables")
	socksAddr := fs.String("socks", fmt.Sprintf("127.0.0.1:%d", wire.SOCKSPort), "SOCKS5 listen address; empty disables")
	dnsAddr := fs.String("dns", fmt.Sprintf("127.0.0.1:%d", wire.DNSPort), "DNS listen address (UDP and TCP); empty disables")
	prepare := fs.Bool("prepare", false, "prepare the current network namespace and exit: bring lo up and let unprivileged users bind ports from 53 (run by the runtime as root of the namespace, before starting the sandbox in it)")
	ready := fs.String("ready", "", "write this file once listening (for scripts and tests)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}

	logger := log.New(stderr, "trueforge-netd: ", 0)
	if *prepare {
		if err := PrepareNamespace(); err != nil {
			logger.Print(err)
			return 1
		}
		return 0
	}
	if err := LoopbackUp(); err != nil {
		logger.Print(err) // bubblewrap brings lo up; this matters only in a bare namespace
	}
	s := New(Config{Socket: *socket, HTTPAddr: *httpAddr, SOCKSAddr: *socksAddr, DNSAddr: *dnsAddr, Log: logger})
	dnsErr, err := s.Listen()
	if err != nil {
		logger.Print(err)
		return 1
	}
	if dnsErr != nil {
		logger.Printf("%v; continuing without DNS (run netd -prepare in the namespace first, so the sandbox user may bind port 53)", dnsErr)
	}
	// Before signalling: a SIGTERM sent as soon as netd says it listens stops it cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if *ready != "" {
		if err := os.WriteFile(*ready, []byte("ready\n"), 0o644); err != nil {
			logger.Print(err)
			return 1
		}
	}
	signalReady()
	_ = s.Serve(ctx)
	return 0
}

// signalReady closes the descriptor the sandbox runtime named in wire.ReadyEnv:
// the runtime runs the sandbox's commands only once netd listens.
func signalReady() {
	v := os.Getenv(wire.ReadyEnv)
	if v == "" {
		return
	}
	os.Unsetenv(wire.ReadyEnv)
	if fd, err := strconv.Atoi(v); err == nil && fd > 2 {
		os.NewFile(uintptr(fd), "ready").Close()
	}
}
