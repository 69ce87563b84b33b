package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	asn1util "k8s.io/apimachinery/pkg/apis/asn1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
)

// clientCA verifies client certificates against
// authentication.x509.clientCAFile, reloaded when the file changes.
type clientCA struct {
	file   string
	bundle atomic.Pointer[caBundle]
}

type caBundle struct {
	pem  []byte
	opts x509.VerifyOptions
}

// newClientCA loads the CA file; Run keeps it fresh.
func newClientCA(file string) (*clientCA, error) {
	c := &clientCA{file: file}
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

// load reads the file, and uses it when it changed and holds
// certificates; otherwise the bundle loaded before stays.
func (c *clientCA) load() error {
	b, err := os.ReadFile(c.file)
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return fmt.Errorf("missing content for CA bundle %q", c.file)
	}
	if cur := c.bundle.Load(); cur != nil && bytes.Equal(cur.pem, b) {
		return nil
	}
	pool, err := certutil.NewPoolFromBytes(b)
	if err != nil {
		return fmt.Errorf("error loading CA bundle %q: %w", c.file, err)
	}
	c.bundle.Store(&caBundle{pem: b, opts: x509.VerifyOptions{
		Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}})
	klog.V(2).InfoS("Loaded a new client CA bundle", "file", c.file)
	return nil
}

// run reloads the file when it changes, until ctx ends.
func (c *clientCA) run(ctx context.Context) {
	watchFiles(ctx, "client CA", []string{c.file}, c.load)
}

// authenticate is apiserver's x509 authenticator with
// CommonNameUserConversion: a certificate chaining to the CA (through
// the other certificates the client sent) for client auth is the user
// of its common name, in the groups of its organizations, with the UID
// of its UID attribute (AllowParsingUserUIDFromCertAuth, on by default
// in 1.34) and its fingerprint as credential ID.
func (c *clientCA) authenticate(r *http.Request) (*User, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	opts := c.bundle.Load().opts
	certs := r.TLS.PeerCertificates
	if len(certs) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, ic := range certs[1:] {
			opts.Intermediates.AddCert(ic)
		}
	}
	chains, err := certs[0].Verify(opts)
	if err != nil {
		return nil, false, fmt.Errorf("verifying certificate %s failed: %w", certificateIdentifier(certs[0]), err)
	}
	return firstUser(chains, func(chain []*x509.Certificate) (*User, bool, error) { return certificateUser(chain[0]) })
}

var uidOID = asn1util.X509UID()

func certificateUser(c *x509.Certificate) (*User, bool, error) {
	if c.Subject.CommonName == "" {
		return nil, false, nil
	}
	var uids []string
	for _, n := range c.Subject.Names {
		if !n.Type.Equal(uidOID) {
			continue
		}
		uid, ok := n.Value.(string)
		if !ok {
			return nil, false, errors.New("unable to parse UID into a string")
		}
		uids = append(uids, uid)
	}
	var uid string
	switch {
	case len(uids) > 1:
		return nil, false, fmt.Errorf("expected 1 UID, but found multiple: %v", uids)
	case len(uids) == 1 && uids[0] == "":
		return nil, false, errors.New("UID cannot be an empty string")
	case len(uids) == 1:
		uid = uids[0]
	}
	fp := sha256.Sum256(c.Raw)
	return &User{
		Name: c.Subject.CommonName, UID: uid, Groups: c.Subject.Organization,
		Extra: map[string][]string{credentialIDKey: {"X509SHA256=" + hex.EncodeToString(fp[:])}},
	}, true, nil
}

// certificateIdentifier names a certificate in errors, as apiserver does.
func certificateIdentifier(c *x509.Certificate) string {
	return fmt.Sprintf("SN=%d, SKID=%s, AKID=%s", c.SerialNumber, colonHex(c.SubjectKeyId), colonHex(c.AuthorityKeyId))
}

func colonHex(b []byte) string {
	parts := make([]string, len(b))
	for i, x := range b {
		parts[i] = fmt.Sprintf("%02X", x)
	}
	return strings.Join(parts, ":")
}
