package sandboxnet_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/nettest"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sandboxnet"
)

// connectVia sends a CONNECT for target over a sandbox's egress socket and returns the
// status and the refusal reason ("" when allowed).
func connectVia(t *testing.T, socket, target string) (int, string) {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header.Get(egress.DenyHeader)
}

// TestAllowCIDRsEnforcedAndKept: an environment's allow_cidrs reach the local sandbox's
// egress proxy, which admits an address inside the range and refuses one outside (both
// exempt from the forbidden ranges here, so the CIDR rule is what decides), and a proxy
// recreated from the record in a new process keeps them.
func TestAllowCIDRsEnforcedAndKept(t *testing.T) {
	st, env, _ := fixture(t)
	ctx := context.Background()
	port, _, err := nettest.CountingServer(t, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env.Settings.AllowCIDRs = []string{"127.0.0.1/32"}
	cfg := sandboxnet.Config{Store: st, Dir: t.TempDir(), Helper: fakeHelper(t),
		AllowAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")}}
	x := sandboxnet.New(cfg)
	defer x.Close()
	_, eg, err := x.Attach(ctx, "s-1", "tf-s-1-1", env)
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if code, why := connectVia(t, eg.Socket, net.JoinHostPort("127.0.0.1", port)); code != http.StatusOK {
			t.Errorf("%s: CONNECT inside the range: %d %s", when, code, why)
		}
		if code, why := connectVia(t, eg.Socket, net.JoinHostPort("127.0.0.2", port)); code != http.StatusForbidden || why != egress.ReasonNotAllowed {
			t.Errorf("%s: CONNECT outside the range: %d %s; want 403 %s", when, code, why, egress.ReasonNotAllowed)
		}
	}
	check("at attach")
	x.Close()
	y := sandboxnet.New(cfg)
	defer y.Close()
	if fresh, err := y.Ensure(ctx, "s-1", "tf-s-1-1"); err != nil || !fresh {
		t.Fatalf("Ensure: %v %v", fresh, err)
	}
	check("recreated")
}
