package egress

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// DenyHeader carries the machine-readable reason of a refusal on the 403 response.
const DenyHeader = "X-Trueforge-Deny"

// Reasons a request is refused, as sent in DenyHeader, the JSON body and the decision log.
const (
	ReasonBlockAll          = "block_all"         // the environment blocks all network
	ReasonNotAllowed        = "not_allowed"       // host not on the allow list
	ReasonIPLiteral         = "ip_literal"        // an IP address where the allow list needs a name
	ReasonForbiddenAddress  = "forbidden_address" // private, loopback, link-local, metadata, CGNAT, ULA...
	ReasonResolveFailed     = "resolve_failed"    // the proxy could not resolve the name
	ReasonBadTarget         = "bad_target"        // malformed host or port
	ReasonSNIMismatch       = "sni_mismatch"      // TLS server name differs from the CONNECT host
	ReasonNoSNI             = "no_sni"            // TLS without a server name under an allow list
	ReasonHostMismatch      = "host_mismatch"     // Host header differs from the target
	ReasonPlaceholderHost   = "placeholder_wrong_host"
	ReasonPlaceholderPlain  = "placeholder_plain_http"
	ReasonSecretRemoved     = "secret_removed"  // placeholder of a secret that no longer exists
	ReasonUnsupported       = "unsupported"     // a request form the proxy does not carry
	ReasonUpstreamFailed    = "upstream_failed" // 502: allowed, but the upstream did not answer
	ReasonSecretSourceError = "secret_source_failed"
	ReasonTooManyTunnels    = "too_many_tunnels"     // 429: Config.MaxTunnels open already
	ReasonTooManyConns      = "too_many_connections" // 429: Config.MaxConns open already
)

// Denial is a refusal: the reason code and a sentence the model can act on.
type Denial struct {
	Reason  string `json:"reason"`
	Host    string `json:"host,omitempty"`
	Message string `json:"message"`
}

func (d *Denial) Error() string { return fmt.Sprintf("egress denied (%s): %s", d.Reason, d.Message) }

func deny(reason, host, format string, args ...any) *Denial {
	return &Denial{Reason: reason, Host: host, Message: fmt.Sprintf(format, args...)}
}

// status is 502 for an upstream failure and 403 for everything the policy refused.
func (d *Denial) status() int {
	switch d.Reason {
	case ReasonUpstreamFailed, ReasonResolveFailed:
		return http.StatusBadGateway
	case ReasonTooManyTunnels, ReasonTooManyConns:
		return http.StatusTooManyRequests
	}
	return http.StatusForbidden
}

func (d *Denial) body() []byte {
	body, _ := json.Marshal(struct {
		Error string `json:"error"`
		*Denial
	}{"egress_denied", d})
	return append(body, '\n')
}

// write sends the denial as a complete HTTP/1.1 response on a raw connection (inside a
// tunnel) and asks the client to close.
func (d *Denial) write(w io.Writer) error {
	body := d.body()
	code := d.status()
	_, err := fmt.Fprintf(w, "HTTP/1.1 %d %s\r\n%s: %s\r\nContent-Type: application/json\r\nContent-Length: %s\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), DenyHeader, d.Reason, strconv.Itoa(len(body)), body)
	return err
}

// serve answers an HTTP request with the denial.
func (d *Denial) serve(w http.ResponseWriter) {
	h := w.Header()
	h.Set(DenyHeader, d.Reason)
	h.Set("Content-Type", "application/json")
	h.Set("Connection", "close")
	w.WriteHeader(d.status())
	_, _ = w.Write(d.body())
}

// asDenial finds the Denial in err, or makes an upstream failure of it.
func asDenial(err error, host string) *Denial {
	var d *Denial
	if errors.As(err, &d) {
		return d
	}
	return deny(ReasonUpstreamFailed, host, "the upstream %s could not be reached: %v", host, err)
}
