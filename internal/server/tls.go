package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
)

// TLSConfig says where the kubelet API's serving certificate comes from.
type TLSConfig struct {
	// CertFile and KeyFile are tlsCertFile and tlsPrivateKeyFile.
	CertFile, KeyFile string
	// GetCertificate is serverTLSBootstrap's certificate manager; it wins
	// over the files.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// CertDir is where a self-signed pair (kubelet.crt, kubelet.key) is
	// made when neither of the above is set, as upstream's --cert-dir.
	CertDir string
	// Host is the self-signed certificate's host name (the node name).
	Host string
	// MinVersion and CipherSuites are tlsMinVersion and tlsCipherSuites
	// by their Go names ("VersionTLS12", "TLS_AES_128_GCM_SHA256", ...).
	MinVersion   string
	CipherSuites []string
	// ClientCAFile is authentication.x509.clientCAFile: clients may
	// present certificates signed by it (they are verified by Auth).
	ClientCAFile string
}

// certFiles serves a certificate pair from files, reloading it when the
// files change (upstream's ReloadKubeletServerCertificateFile). A pair
// that does not load (a file missing or empty, or a key that does not
// match) leaves the one loaded before in use.
type certFiles struct {
	certFile, keyFile string
	mu                sync.Mutex
	cert, key         []byte
	parsed            *tls.Certificate
}

func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parsed, nil
}

// load reads the pair and uses it when it changed.
func (c *certFiles) load() error {
	cert, err := os.ReadFile(c.certFile)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(c.keyFile)
	if err != nil {
		return err
	}
	if len(cert) == 0 || len(key) == 0 {
		return fmt.Errorf("missing content for serving cert %s or key %s", c.certFile, c.keyFile)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parsed != nil && bytes.Equal(cert, c.cert) && bytes.Equal(key, c.key) {
		return nil
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return err
	}
	c.cert, c.key, c.parsed = cert, key, &pair
	klog.V(2).InfoS("Loaded a new serving certificate", "certFile", c.certFile, "keyFile", c.keyFile)
	return nil
}

// run reloads the pair when a file changes, until ctx ends.
func (c *certFiles) run(ctx context.Context) {
	watchFiles(ctx, "serving certificate", []string{c.certFile, c.keyFile}, c.load)
}

// NewTLS builds the kubelet API's TLS configuration, and returns what
// keeps a certificate read from files fresh (nil otherwise), to be run
// until the server stops.
func NewTLS(cfg TLSConfig) (*tls.Config, func(context.Context), error) {
	suites, err := cliflag.TLSCipherSuites(cfg.CipherSuites)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsCipherSuites: %w", err)
	}
	insecure := cliflag.InsecureTLSCiphers()
	for name, id := range insecure {
		for _, s := range suites {
			if s == id {
				klog.InfoS("Use of insecure cipher detected", "cipher", name)
			}
		}
	}
	minVersion, err := cliflag.TLSVersion(cfg.MinVersion)
	if err != nil {
		return nil, nil, fmt.Errorf("tlsMinVersion: %w", err)
	}
	if minVersion == tls.VersionTLS13 && len(suites) > 0 {
		klog.InfoS("TLS 1.3 cipher suites are not configurable; tlsCipherSuites ignored")
	}
	tc := &tls.Config{
		MinVersion:   minVersion,
		CipherSuites: suites,
		// Streaming upgrades need HTTP/1.1.
		NextProtos: []string{"http/1.1"},
	}
	if cfg.ClientCAFile != "" {
		pool, err := certutil.NewPool(cfg.ClientCAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("load client CA file %s: %w", cfg.ClientCAFile, err)
		}
		tc.ClientCAs = pool
		// Ask for a certificate but accept connections without one: a
		// bearer token or anonymous access may still authenticate them.
		tc.ClientAuth = tls.RequestClientCert
	}
	if cfg.GetCertificate != nil {
		tc.GetCertificate = cfg.GetCertificate
		return tc, nil, nil
	}
	certFile, keyFile := cfg.CertFile, cfg.KeyFile
	if certFile == "" && keyFile == "" {
		certFile, keyFile = filepath.Join(cfg.CertDir, "kubelet.crt"), filepath.Join(cfg.CertDir, "kubelet.key")
		if err := ensureSelfSigned(certFile, keyFile, cfg.Host); err != nil {
			return nil, nil, err
		}
	}
	files := &certFiles{certFile: certFile, keyFile: keyFile}
	if err := files.load(); err != nil {
		return nil, nil, fmt.Errorf("serving certificate: %w", err)
	}
	tc.GetCertificate = files.get
	return tc, files.run, nil
}

// ensureSelfSigned makes a self-signed pair for host at certFile and
// keyFile unless both can be read already, as upstream does.
func ensureSelfSigned(certFile, keyFile, host string) error {
	ok, err := certutil.CanReadCertAndKey(certFile, keyFile)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	cert, key, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
	if err != nil {
		return fmt.Errorf("generate self-signed serving certificate: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(certFile), 0o700); err != nil {
		return err
	}
	if err := certutil.WriteCert(certFile, cert); err != nil {
		return err
	}
	if err := keyutil.WriteKey(keyFile, key); err != nil {
		return err
	}
	klog.V(2).InfoS("Using a self-signed serving certificate", "certFile", certFile, "keyFile", keyFile)
	return nil
}
