package egress_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/nettest"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/egress/netd"
)

// countingServer is a TCP server on host loopback that counts the connections it
// accepts: what the attack would reach.
func countingServer(t *testing.T) (port string, accepted func() int64) {
	t.Helper()
	port, accepted, err := nettest.CountingServer(t, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return port, accepted
}

// TestEmbeddedIPv4Refused: IPv6 forms that embed a loopback IPv4 address (IPv4-compatible
// ::127.0.0.1, IPv4-translated ::ffff:0:127.0.0.1, and the NAT64, 6to4 and Teredo
// embeddings) are refused as forbidden addresses, by CONNECT and by SOCKS through netd,
// and the loopback server they spell receives nothing. No address is exempt here, as in
// production.
func TestEmbeddedIPv4Refused(t *testing.T) {
	f := newFixture(t, egress.Policy{}, nil, func(c *egress.Config) { c.AllowAddrs = nil })
	port, accepted := countingServer(t)
	targets := []string{"::127.0.0.1", "::ffff:0:127.0.0.1", "64:ff9b::127.0.0.1", "2002:7f00:1::1", "2001:0:7f00:1::1", "64:ff9b:1::7f00:1"}
	for _, host := range targets {
		resp, _, _ := f.connect(t, net.JoinHostPort(host, port))
		if got := denyReason(t, resp); got != egress.ReasonForbiddenAddress {
			t.Errorf("CONNECT [%s]:%s: reason %q, want %q", host, port, got, egress.ReasonForbiddenAddress)
		}
	}

	s := netd.New(netd.Config{Socket: f.socket, HTTPAddr: "127.0.0.1:0", SOCKSAddr: "127.0.0.1:0", DNSAddr: "127.0.0.1:0"})
	if _, err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); s.Close() })
	go func() { _ = s.Serve(ctx) }()
	p, _ := strconv.Atoi(port)
	for _, host := range targets {
		if code := socksConnect(t, s.SOCKSAddr(), netip.MustParseAddr(host), uint16(p)); code == 0 {
			t.Errorf("SOCKS [%s]:%s: granted", host, port)
		}
	}
	if n := accepted(); n != 0 {
		t.Fatalf("the loopback server accepted %d connections", n)
	}
	for _, d := range f.log.all() {
		if d.Allowed {
			t.Errorf("proxy allowed %s:%s", d.Host, d.Port)
		}
	}
}

// socksConnect asks a SOCKS5 server for a CONNECT to an IPv6 address and returns the
// reply code (0 is success).
func socksConnect(t *testing.T, server string, a netip.Addr, port uint16) byte {
	t.Helper()
	c, err := net.DialTimeout("tcp", server, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte{5, 1, 0}); err != nil {
		t.Fatal(err)
	}
	var hello [2]byte
	if _, err := io.ReadFull(c, hello[:]); err != nil || hello != [2]byte{5, 0} {
		t.Fatalf("SOCKS hello: %v %v", hello, err)
	}
	b := a.As16()
	req := append([]byte{5, 1, 0, 4}, b[:]...)
	req = binary.BigEndian.AppendUint16(req, port)
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	var reply [10]byte
	if _, err := io.ReadFull(c, reply[:2]); err != nil {
		t.Fatalf("SOCKS reply: %v", err)
	}
	return reply[1]
}
