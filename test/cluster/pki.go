package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// clockSkew back-dates NotBefore so a certificate is valid at once even
	// if another process' clock is slightly behind.
	clockSkew = 5 * time.Minute
)

// keyPair is a certificate and its private key.
type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func newECKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

// newCA makes a self-signed ECDSA P-256 CA valid for ten years.
func newCA(cn string) (*keyPair, error) {
	return issue(&x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, caValidity, nil)
}

// issue makes a fresh ECDSA P-256 key and a certificate for it from tmpl,
// with a random serial, valid from clockSkew ago for validity, signed by
// parent (nil: self-signed).
func issue(tmpl *x509.Certificate, validity time.Duration, parent *keyPair) (*keyPair, error) {
	key, err := newECKey()
	if err != nil {
		return nil, err
	}
	if tmpl.SerialNumber, err = newSerial(); err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-clockSkew), now.Add(validity)
	signer, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, key.Public(), signerKey)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

// loadOrCreateCA loads the CA at <base>.{crt,key}, or makes and writes one.
func loadOrCreateCA(base, cn string) (*keyPair, error) {
	ca, err := loadKeyPair(base)
	if err == nil {
		return ca, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if ca, err = newCA(cn); err != nil {
		return nil, err
	}
	return ca, ca.write(base)
}

// leafSpec describes a certificate signed by the cluster CA.
type leafSpec struct {
	cn     string
	orgs   []string
	dns    []string
	ips    []net.IP
	server bool // serving certificate (ExtKeyUsageServerAuth)
	client bool // client certificate (ExtKeyUsageClientAuth)
}

// sign makes a fresh ECDSA key and a certificate for it signed by ca.
func (ca *keyPair) sign(s leafSpec) (*keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: s.cn, Organization: s.orgs},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		DNSNames:              s.dns,
		IPAddresses:           s.ips,
	}
	if s.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if s.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	return issue(tmpl, leafValidity, ca)
}

func (kp *keyPair) certPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.cert.Raw})
}

func (kp *keyPair) keyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(kp.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// write stores the pair as <base>.crt and <base>.key.
func (kp *keyPair) write(base string) error {
	keyPEM, err := kp.keyPEM()
	if err != nil {
		return err
	}
	if err := writeFileAtomic(base+".crt", kp.certPEM(), 0o644); err != nil {
		return err
	}
	return writeFileAtomic(base+".key", keyPEM, 0o600)
}

// loadKeyPair reads <base>.crt and <base>.key as written by write.
func loadKeyPair(base string) (*keyPair, error) {
	certPEM, err := os.ReadFile(base + ".crt")
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(base + ".key")
	if err != nil {
		return nil, err
	}
	cert, err := loadCertPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%s.crt: %w", base, err)
	}
	key, err := parsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s.key: %w", base, err)
	}
	return &keyPair{cert: cert, key: key}, nil
}

func loadCertPEM(data []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

func parsePrivateKeyPEM(data []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("no PEM block")
	}
	var k any
	var err error
	switch b.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	default:
		return nil, fmt.Errorf("unexpected PEM block %q", b.Type)
	}
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported key type %T", k)
	}
	return s, nil
}

// ensureServiceAccountKey makes the RSA 2048 key pair that signs and
// verifies ServiceAccount tokens (sa.key, sa.pub) unless it already exists,
// so that tokens survive a restart on the same Dir.
func ensureServiceAccountKey(keyPath, pubPath string) error {
	if _, err := os.Stat(keyPath); err == nil {
		if _, err := os.Stat(pubPath); err == nil {
			return nil
		}
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return err
	}
	return writeFileAtomic(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// writeFileAtomic writes data to a temporary file next to path and renames it.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
