package egress

import (
	"crypto/tls"
	"crypto/x509"
)

// newClientTLS verifies upstream servers normally: the given roots (nil: the host's),
// the name from the CONNECT target.
func newClientTLS(roots *x509.CertPool) *tls.Config {
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
}
