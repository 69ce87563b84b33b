package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"
	"k8s.io/klog/v2"
)

// rotationCheckPeriod is how often the client transport looks for a
// rotated certificate.
const rotationCheckPeriod = 5 * time.Second

// ClientConfig configures the kubelet's apiserver credentials.
type ClientConfig struct {
	Kubeconfig          string // --kubeconfig: read, and written by a bootstrap
	BootstrapKubeconfig string // --bootstrap-kubeconfig, may be empty
	CertDir             string // where bootstrapped and rotated pairs live
	NodeName            string
	Rotate              bool // rotateCertificates
	// RenewFailures counts failed renewals; nil: not counted.
	RenewFailures certificate.Counter

	bootstrapClient CSRClient // replaces the bootstrap kubeconfig's client in tests
}

// Client is the kubelet's apiserver credentials: Config builds its
// clients; Run keeps the client certificate fresh when rotating.
type Client struct {
	Config  *rest.Config
	manager certificate.Manager // nil without rotation
	rotator *connRotator
}

// LoadClient bootstraps the client certificate when a bootstrap
// kubeconfig is given and the kubeconfig has no valid one (blocking until
// the CSR is signed), then loads the kubeconfig. With Rotate, the returned
// Config's transport presents the rotating certificate.
func LoadClient(ctx context.Context, cfg ClientConfig) (*Client, error) {
	if cfg.BootstrapKubeconfig != "" {
		need, reason, err := NeedsBootstrap(cfg.Kubeconfig, time.Now())
		if err != nil {
			return nil, err
		}
		if need {
			klog.InfoS("Requesting a client certificate with the bootstrap kubeconfig", "reason", reason, "bootstrapKubeconfig", cfg.BootstrapKubeconfig)
			if err := Bootstrap(ctx, BootstrapConfig{
				Kubeconfig: cfg.Kubeconfig, BootstrapKubeconfig: cfg.BootstrapKubeconfig,
				CertDir: cfg.CertDir, NodeName: cfg.NodeName, Client: cfg.bootstrapClient,
			}); err != nil {
				return nil, fmt.Errorf("TLS bootstrap: %w", err)
			}
		} else {
			klog.V(2).InfoS("Kubeconfig has a valid client certificate; no bootstrap needed", "kubeconfig", cfg.Kubeconfig)
		}
	}
	rc, err := loadKubeconfig(cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	if !cfg.Rotate {
		return &Client{Config: rc}, nil
	}
	return newRotatingClient(rc, cfg)
}

// newRotatingClient puts the kubeconfig's client pair under a
// certificate.Manager that renews it through CSRs at 70–90 % of its
// lifetime, and gives the client a transport that follows it.
func newRotatingClient(rc *rest.Config, cfg ClientConfig) (*Client, error) {
	if err := os.MkdirAll(cfg.CertDir, 0o700); err != nil {
		return nil, fmt.Errorf("create certificate directory: %w", err)
	}
	// A pair in the cert directory wins; else the kubeconfig's files; else
	// its embedded data, which the manager stores and rotates at once
	// (upstream's behaviour for kubeadm's initial credentials).
	store, err := certificate.NewFileStore(clientPairPrefix, cfg.CertDir, cfg.CertDir, rc.CertFile, rc.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("client certificate store: %w", err)
	}
	var rotating *rest.Config
	clientsetFn := func(current *tls.Certificate) (kubernetes.Interface, error) {
		if current == nil && cfg.BootstrapKubeconfig != "" {
			brc, err := loadKubeconfig(cfg.BootstrapKubeconfig)
			if err != nil {
				return nil, fmt.Errorf("load bootstrap kubeconfig: %w", err)
			}
			return newCSRClientsetForConfig(brc)
		}
		return newCSRClientsetForConfig(rest.CopyConfig(rotating))
	}
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn: clientsetFn,
		Template: &x509.CertificateRequest{Subject: pkix.Name{
			CommonName: "system:node:" + cfg.NodeName, Organization: []string{nodesGroup},
		}},
		SignerName:              certificatesv1.KubeAPIServerClientKubeletSignerName,
		GetUsages:               certificate.DefaultKubeletClientGetUsages,
		CertificateStore:        store,
		BootstrapCertificatePEM: rc.CertData,
		BootstrapKeyPEM:         rc.KeyData,
		Name:                    "kubelet client",
		CertificateRenewFailure: cfg.RenewFailures,
	})
	if err != nil {
		return nil, fmt.Errorf("client certificate manager: %w", err)
	}
	rotating, closeAll, err := rotatingConfig(rc, m.Current)
	if err != nil {
		return nil, err
	}
	return &Client{Config: rotating, manager: m, rotator: newConnRotator(m.Current, closeAll)}, nil
}

// Run rotates the client certificate until ctx ends; without rotation it
// returns at once.
func (c *Client) Run(ctx context.Context) {
	if c.manager == nil {
		return
	}
	klog.InfoS("Starting client certificate rotation")
	c.manager.Start()
	defer c.manager.Stop()
	c.rotator.run(ctx, rotationCheckPeriod)
}

// Current is the client certificate in use, nil without rotation.
func (c *Client) Current() *tls.Certificate {
	if c.manager == nil {
		return nil
	}
	return c.manager.Current()
}
