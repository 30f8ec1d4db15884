// Command trueforge-netd is the in-sandbox network helper: started by the sandbox runtime
// inside the sandbox's network namespace (only lo), it serves an HTTP proxy, a SOCKS5
// proxy and a synthetic DNS on loopback and carries every connection to the harness's
// egress proxy through the unix socket bound at /run/trueforge/egress.sock. See package
// internal/egress/netd. Build it static: CGO_ENABLED=0 go build ./cmd/trueforge-netd.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/egress/netd"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

func main() {
	socket := flag.String("socket", sandbox.EgressSocketPath, "the harness's egress unix socket")
	httpAddr := flag.String("http", fmt.Sprintf("127.0.0.1:%d", egress.HTTPProxyPort), "HTTP proxy listen address; empty disables")
	socksAddr := flag.String("socks", fmt.Sprintf("127.0.0.1:%d", egress.SOCKSPort), "SOCKS5 listen address; empty disables")
	dnsAddr := flag.String("dns", fmt.Sprintf("127.0.0.1:%d", egress.DNSPort), "DNS listen address (UDP and TCP); empty disables")
	handOff := flag.Bool("hand-off", true, "hand CONNECT clients' sockets to the harness (one hop for tunnel data) instead of relaying them")
	setuid := flag.String("setuid", "", "uid:gid to switch to once listening, when started as root (so port 53 can be bound with only CAP_NET_BIND_SERVICE and the helper then runs as the sandbox user)")
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
	s := netd.New(netd.Config{Socket: *socket, HTTPAddr: *httpAddr, SOCKSAddr: *socksAddr, DNSAddr: *dnsAddr, NoHandOff: !*handOff, Log: logger})
	dnsErr, err := s.Listen()
	if err != nil {
		logger.Fatal(err)
	}
	if dnsErr != nil {
		logger.Printf("%v; continuing without DNS (give netd CAP_NET_BIND_SERVICE for port 53)", dnsErr)
	}
	if *setuid != "" {
		if err := dropTo(*setuid); err != nil {
			logger.Fatal(err)
		}
	}
	if *ready != "" {
		if err := os.WriteFile(*ready, []byte("ready\n"), 0o644); err != nil {
			logger.Fatal(err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	_ = s.Serve(ctx)
}

// dropTo switches every thread to uid:gid with no supplementary groups, which also
// clears all capabilities.
func dropTo(spec string) error {
	var uid, gid int
	if _, err := fmt.Sscanf(spec, "%d:%d", &uid, &gid); err != nil {
		return fmt.Errorf("-setuid %q: want uid:gid, for example 1000:1000", spec)
	}
	if err := syscall.Setgroups(nil); err != nil {
		// A user namespace may forbid setgroups (bubblewrap writes "deny"); then there
		// must be no supplementary groups to shed.
		if gs, _ := syscall.Getgroups(); len(gs) > 0 {
			return fmt.Errorf("-setuid: setgroups: %w (supplementary groups %v)", err, gs)
		}
	}
	if err := syscall.Setgid(gid); err != nil {
		return fmt.Errorf("-setuid: setgid %d: %w", gid, err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return fmt.Errorf("-setuid: setuid %d: %w", uid, err)
	}
	return nil
}
