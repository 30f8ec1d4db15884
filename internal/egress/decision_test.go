package egress_test

import (
	"io"
	"net"
	"net/http"
	"testing"
)

// A forwarded request's decision is in the log once the upstream has answered, before
// the sandbox has read the response's body: a command that asked has its decision logged
// before it ends, plain and terminated alike. The body here is far larger than what the
// sockets between the upstream and the client buffer, so a decision logged only after
// the body was relayed could not be there yet.
func TestForwardedDecisionLoggedBeforeTheBody(t *testing.T) {
	const size = 64 << 20
	f := secretFixture(t)
	c := f.client(t)
	for _, tc := range []struct{ mode, url string }{
		{"plain", "http://" + net.JoinHostPort("api.allowed.test", f.plainUp.port) + "/bytes?n=67108864"},
		{"terminate", f.url("secret.allowed.test", "/bytes?n=67108864")},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			resp, err := c.Get(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			logged := false
			for _, d := range f.log.all() {
				logged = logged || d.Mode == tc.mode && d.Allowed && d.Path == "/bytes"
			}
			if !logged {
				t.Errorf("the response's headers arrived, but the log has no allowed %s decision for /bytes: %+v", tc.mode, f.log.all())
			}
			if n, err := io.Copy(io.Discard, resp.Body); err != nil || n != size || resp.StatusCode != http.StatusOK {
				t.Fatalf("%d: read %d of %d: %v", resp.StatusCode, n, size, err)
			}
		})
	}
}
