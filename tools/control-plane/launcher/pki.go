package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// authority is a certificate authority living for one control plane. P-256 keys: generating one
// takes well under a millisecond, where RSA-2048 takes tens, and every component accepts them.
type authority struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

// issued is a certificate and its key, PEM-encoded.
type issued struct {
	certPEM []byte
	keyPEM  []byte
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// keyPEM encodes PKCS #8 ("PRIVATE KEY"), the one form that Go's TLS, Kubernetes' key files and
// the Rust clients (rustls) all read.
func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// validity: from an hour ago (clock skew between this process and a test's) for a day, far longer
// than any test run and short enough that a leaked file is worthless soon.
func validity() (time.Time, time.Time) {
	now := time.Now()
	return now.Add(-time.Hour), now.Add(24 * time.Hour)
}

func newAuthority(name string) (*authority, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	from, until := validity()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             from,
		NotAfter:              until,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("self-signing %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, certPEM: certPEM(der)}, nil
}

// leaf says what a certificate is for.
type leaf struct {
	commonName string
	orgs       []string
	hosts      []string // DNS names or IP addresses: a serving certificate
	server     bool
	client     bool
}

func (a *authority) issue(l leaf) (*issued, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	from, until := validity()
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: l.commonName, Organization: l.orgs},
		NotBefore:    from,
		NotAfter:     until,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if l.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if l.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	for _, h := range l.hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, fmt.Errorf("issuing %s: %w", l.commonName, err)
	}
	k, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	return &issued{certPEM: certPEM(der), keyPEM: k}, nil
}

// write puts the certificate at dir/name.crt and its key at dir/name.key (owner-only) and returns
// the two paths.
func (i *issued) write(dir, name string) (string, string, error) {
	crt := filepath.Join(dir, name+".crt")
	key := filepath.Join(dir, name+".key")
	if err := os.WriteFile(crt, i.certPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(key, i.keyPEM, 0o600); err != nil {
		return "", "", err
	}
	return crt, key, nil
}

// serviceAccountKeys writes the key pair that signs service account tokens (kube-apiserver
// signs with the private key, verifies with the public one; the controller-manager's token
// controller signs legacy tokens with the private key).
func serviceAccountKeys(dir string) (string, string, error) {
	key, err := newKey()
	if err != nil {
		return "", "", err
	}
	priv, err := keyPEM(key)
	if err != nil {
		return "", "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	privPath := filepath.Join(dir, "service-account.key")
	pubPath := filepath.Join(dir, "service-account.pub")
	if err := os.WriteFile(privPath, priv, 0o600); err != nil {
		return "", "", err
	}
	pub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	if err := os.WriteFile(pubPath, pub, 0o600); err != nil {
		return "", "", err
	}
	return privPath, pubPath, nil
}

// randomToken is a bearer token of 32 random bytes, hex-encoded.
func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", b), nil
}
