package bus

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCert writes a PEM certificate and key signed by parent (self-signed
// when parent is nil) and returns them with the file paths.
func writeCert(t *testing.T, dir, name string, tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key, certFile, keyFile
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ca, caKey, caFile, _ := writeCert(t, dir, "ca", &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hacrl test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}, nil, nil)
	_, _, srvCert, srvKey := writeCert(t, dir, "server", &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}, ca, caKey)
	_, _, cliCert, cliKey := writeCert(t, dir, "client", &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "agent"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}, ca, caKey)

	tests := []struct {
		name    string
		server  TLSFiles
		client  TLSFiles
		wantErr string // "" = connects
	}{
		{"server TLS, client trusts the CA", TLSFiles{CertFile: srvCert, KeyFile: srvKey}, TLSFiles{CAFile: caFile}, ""},
		{"server TLS, client without the CA", TLSFiles{CertFile: srvCert, KeyFile: srvKey}, TLSFiles{}, "certificate"},
		{"mutual TLS, client certificate", TLSFiles{CertFile: srvCert, KeyFile: srvKey, CAFile: caFile},
			TLSFiles{CAFile: caFile, CertFile: cliCert, KeyFile: cliKey}, ""},
		{"mutual TLS, no client certificate", TLSFiles{CertFile: srvCert, KeyFile: srvKey, CAFile: caFile},
			TLSFiles{CAFile: caFile}, "tls"}, // the refusal reaches the client as "certificate required" or as the closed connection, by timing
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t, ServerOptions{TLS: tt.server})
			// A server that refuses the client's certificate may just not
			// answer, which the client cannot tell from a slow network:
			// it tries again for its Wait.
			c, err := Connect(testCtx(t), srv.URL(), ClientOptions{TLS: tt.client, Wait: 2 * time.Second})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				openRun(t, c, RunSpec{})
				return
			}
			if err == nil {
				c.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantErr)
			}
		})
	}
}
