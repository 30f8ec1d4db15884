package netd

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"
)

func startDNS(t *testing.T) *Server {
	t.Helper()
	s := New(Config{Socket: filepath.Join(t.TempDir(), "none.sock"), DNSAddr: "127.0.0.1:0"})
	dnsErr, err := s.Listen()
	if err != nil || dnsErr != nil {
		t.Fatal(err, dnsErr)
	}
	t.Cleanup(s.Close)
	return s
}

func resolverFor(addr, network string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

// netd's DNS answers locally, over UDP and TCP, with stable synthetic addresses.
func TestDNSAnswersSynthetic(t *testing.T) {
	s := startDNS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	synth := netip.MustParsePrefix("198.18.0.0/15")
	var first netip.Addr
	for _, network := range []string{"udp", "tcp"} {
		r := resolverFor(s.DNSAddr(), network)
		addrs, err := r.LookupNetIP(ctx, "ip", "Data-To-Leak.attacker.example")
		if err != nil {
			t.Fatalf("%s: %v", network, err)
		}
		if len(addrs) != 1 || !synth.Contains(addrs[0]) {
			t.Fatalf("%s: %v, want one address in %s (AAAA answered empty)", network, addrs, synth)
		}
		if first.IsValid() && addrs[0] != first {
			t.Fatalf("the same name got %s and %s", first, addrs[0])
		}
		first = addrs[0]
		if got := s.names.hostFor(first.String()); got != "data-to-leak.attacker.example" {
			t.Fatalf("%s maps back to %q", first, got)
		}
		other, err := r.LookupNetIP(ctx, "ip4", "other.example")
		if err != nil || other[0] == first {
			t.Fatalf("other name: %v %v", other, err)
		}
		lo, err := r.LookupNetIP(ctx, "ip4", "localhost")
		if err != nil || lo[0].Unmap() != netip.MustParseAddr("127.0.0.1") {
			t.Fatalf("localhost: %v %v", lo, err)
		}
	}
	// Addresses the program did not get from netd pass through unchanged for the harness
	// to judge.
	if got := s.names.hostFor("198.18.9.9"); got != "198.18.9.9" {
		t.Fatalf("unknown synthetic address mapped to %q", got)
	}
}

func TestDNSMalformedQueries(t *testing.T) {
	s := startDNS(t)
	for _, q := range [][]byte{
		nil,
		{0, 1, 0x80, 0, 0, 1, 0, 0, 0, 0, 0, 0}, // a response
		{0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 70, 'a'},               // label running past the end
		{0, 1, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1, 'a', 0, 0, 1, 0, 1}, // two questions
	} {
		r := s.answer(q)
		if len(q) < 12 || q[2]&0x80 != 0 {
			if r != nil {
				t.Fatalf("%x: answered %x", q, r)
			}
			continue
		}
		if r == nil || r[3]&0xf != rcodeFormat {
			t.Fatalf("%x: got %x, want FORMERR", q, r)
		}
	}
}

func TestNamesEvictOldest(t *testing.T) {
	n := newNames()
	first := n.addr("n0.example")
	for i := 1; i <= MaxNames; i++ {
		n.addr(fmt.Sprintf("n%d.example", i))
	}
	if _, ok := n.byName["n0.example"]; ok {
		t.Fatal("the oldest name was not evicted")
	}
	if got, ok := n.name(first); ok && got == "n0.example" {
		t.Fatal("the evicted name's address still maps to it")
	}
	if len(n.byName) != MaxNames || len(n.byAddr) != MaxNames {
		t.Fatalf("table holds %d/%d entries, want %d", len(n.byName), len(n.byAddr), MaxNames)
	}
}
