package nettest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// UpstreamTLS is the TLS identity of a test's stand-in for a public server that a
// sandbox reaches through egress: a CA of the test's own, standing for the public roots,
// and a server certificate it signed.
type UpstreamTLS struct {
	CAPEM []byte          // the CA, PEM-encoded: the roots egress is given as the system's
	Pool  *x509.CertPool  // the CA, for clients on the host
	Cert  tls.Certificate // the server's, valid for the names and addresses asked for
}

// NewUpstreamTLS makes a CA and a server certificate for names and ips, valid for an
// hour either side of now.
func NewUpstreamTLS(tb testing.TB, names []string, ips ...net.IP) *UpstreamTLS {
	tb.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "upstream test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	u := &UpstreamTLS{CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), Pool: x509.NewCertPool()}
	u.Pool.AddCert(ca)
	lkey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ltmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "upstream"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: names, IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	lder, err := x509.CreateCertificate(rand.Reader, ltmpl, ca, &lkey.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	u.Cert = tls.Certificate{Certificate: [][]byte{lder}, PrivateKey: lkey}
	return u
}
