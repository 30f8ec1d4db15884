package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestParsePatternRejects(t *testing.T) {
	for _, s := range []string{"", "*", "*.com", "*.", "https://x.com", "x.com/path", "x.com:443", "[::1]", "1.2.3.4", "a.*.com", "x*.com", "user@x.com", "x .com", "-x.com", "x..com"} {
		if _, err := ParsePattern(s); err == nil {
			t.Errorf("ParsePattern(%q) accepted", s)
		}
	}
}

func TestPatternMatch(t *testing.T) {
	cases := []struct {
		pat, host string
		want      bool
	}{
		{"api.github.com", "api.github.com", true},
		{"API.GitHub.com.", "api.github.com", true},
		{"api.github.com", "x.api.github.com", false},
		{"*.github.com", "api.github.com", true},
		{"*.github.com", "a.b.github.com", true},
		{"*.github.com", "github.com", false},
		{"*.github.com", "evilgithub.com", false},
		{"*.github.com", "github.com.evil.com", false},
	}
	for _, c := range cases {
		p, err := ParsePattern(c.pat)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Match(c.host); got != c.want {
			t.Errorf("%q.Match(%q) = %v", c.pat, c.host, got)
		}
	}
}

func TestNormalizeHost(t *testing.T) {
	for in, want := range map[string]string{"Example.COM.": "example.com", "[::ffff:10.0.0.1]": "10.0.0.1", "::1": "::1", "xn--bcher-kva.de": "xn--bcher-kva.de"} {
		if got, err := NormalizeHost(in); err != nil || got != want {
			t.Errorf("NormalizeHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"a\r\nb", "bücher.de", "a b", "", strings.Repeat("a", 64) + ".com"} {
		if _, err := NormalizeHost(in); err == nil {
			t.Errorf("NormalizeHost(%q) accepted", in)
		}
	}
}

func TestForbiddenAddresses(t *testing.T) {
	for _, s := range []string{"127.0.0.1", "10.1.1.1", "172.16.0.1", "192.168.0.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "::1", "fd00:ec2::254", "fe80::1", "::ffff:127.0.0.1", "64:ff9b::a00:1", "2002:a00:1::1", "198.18.0.1", "224.0.0.1", "255.255.255.255",
		"::127.0.0.1", "::8.8.8.8", "::", "::ffff:0:127.0.0.1", "::ffff:0:8.8.8.8", "64:ff9b::127.0.0.1", "64:ff9b::169.254.169.254", "64:ff9b:1::808:808", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2002:808:808::1"} {
		if _, bad := addrForbidden(netip.MustParseAddr(s), nil); !bad {
			t.Errorf("%s not forbidden", s)
		}
	}
	// The well-known NAT64 prefix is checked by the IPv4 address it embeds.
	for _, s := range []string{"93.184.216.34", "8.8.8.8", "2606:4700::1111", "1.1.1.1", "64:ff9b::8.8.8.8"} {
		if r, bad := addrForbidden(netip.MustParseAddr(s), nil); bad {
			t.Errorf("%s forbidden by %s", s, r)
		}
	}
	// The allowance is per address, not per range.
	allow := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	if _, bad := addrForbidden(netip.MustParseAddr("127.0.0.1"), allow); bad {
		t.Error("allowed address refused")
	}
	if _, bad := addrForbidden(netip.MustParseAddr("127.0.0.2"), allow); !bad {
		t.Error("allowance leaked to a neighbour")
	}
	for _, s := range []string{"::127.0.0.1", "64:ff9b::127.0.0.1", "::ffff:0:127.0.0.1"} {
		if _, bad := addrForbidden(netip.MustParseAddr(s), allow); !bad {
			t.Errorf("allowance of 127.0.0.1 leaked to %s", s)
		}
	}
}

// TestAlwaysForbidden: the plan-time check of allow_cidrs reads the same list: a range
// inside the forbidden ranges (one or several together) is reported, one that holds any
// address the proxy may dial is not.
func TestAlwaysForbidden(t *testing.T) {
	for _, s := range []string{"10.20.0.0/16", "10.0.0.0/8", "127.0.0.1/32", "169.254.169.254/32", "192.168.1.0/24", "203.0.113.0/24",
		"224.0.0.0/3", "fd00::/8", "::1/128", "::/96", "::ffff:10.0.0.0/104", "64:ff9b::a00:0/104", "2002::/16", "fe80::/64", "::ffff:0:0:0/96"} {
		if _, ok := AlwaysForbidden(netip.MustParsePrefix(s)); !ok {
			t.Errorf("%s not reported as always forbidden", s)
		}
	}
	for _, s := range []string{"0.0.0.0/0", "::/0", "8.8.8.0/24", "140.82.112.0/20", "2606:4700::/32", "64:ff9b::808:800/120", "10.0.0.0/7", "192.0.0.0/23"} {
		if r, ok := AlwaysForbidden(netip.MustParsePrefix(s)); ok {
			t.Errorf("%s reported as always forbidden (by %s)", s, r)
		}
	}
}

// peekSNI reads the server name from a real crypto/tls ClientHello without consuming it.
func TestPeekSNI(t *testing.T) {
	for _, name := range []string{"api.example.com", ""} {
		a, b := net.Pipe()
		go func() {
			c := tls.Client(a, &tls.Config{ServerName: name, InsecureSkipVerify: true})
			_ = c.Handshake()
		}()
		br := bufio.NewReaderSize(b, maxClientHello+5)
		got, err := peekSNI(br)
		if err != nil || got != name {
			t.Fatalf("peekSNI = %q, %v; want %q", got, err, name)
		}
		if first, _ := br.Peek(1); first[0] != 0x16 {
			t.Fatal("peekSNI consumed the hello")
		}
		a.Close()
		b.Close()
	}
	if _, err := peekSNI(bufio.NewReader(bytes.NewReader([]byte("GET / HTTP/1.1\r\n\r\n")))); err != errNotTLS {
		t.Fatalf("plain HTTP: %v", err)
	}
}
