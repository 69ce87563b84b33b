// Package certs gives Skiff its credentials: TLS bootstrapping of the
// node's client certificate from a bootstrap token, rotation of that
// certificate before it expires (with the apiserver client following the
// new one), and a serving certificate obtained through a kubelet-serving
// CSR. The certificate managers and the file store are client-go's
// (k8s.io/client-go/util/certificate); this package decides when to use
// them and wires them into the kubelet.
package certs

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"
)

const (
	// clientPairPrefix names the client pair in the cert directory, as
	// upstream: kubelet-client-current.pem -> kubelet-client-<ts>.pem.
	clientPairPrefix = "kubelet-client"
	// pendingKeyFile keeps the bootstrap key across restarts until its CSR
	// is signed, so a restarted Skiff finds its earlier CSR again (the CSR
	// name is derived from the key) instead of piling up new ones.
	pendingKeyFile = "kubelet-client.key.tmp"
	nodesGroup     = "system:nodes"
)

// NeedsBootstrap reports whether the kubeconfig at path lacks usable
// client credentials: the file is missing or unreadable, or it has no
// client certificate, or one of its certificates has expired at now. The
// reason says which. An error means the file exists but cannot be
// examined at all (e.g. permission denied), which must stop the kubelet
// rather than overwrite the file.
func NeedsBootstrap(path string, now time.Time) (bool, string, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return true, "kubeconfig does not exist", nil
	} else if err != nil {
		return false, "", fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	rc, err := loadKubeconfig(path)
	if err != nil {
		return true, fmt.Sprintf("kubeconfig is invalid: %v", err), nil
	}
	if err := rest.LoadTLSFiles(rc); err != nil {
		return true, fmt.Sprintf("client certificate unreadable: %v", err), nil
	}
	if len(rc.CertData) == 0 {
		return true, "kubeconfig has no client certificate", nil
	}
	certs, err := certutil.ParseCertsPEM(rc.CertData)
	if err != nil {
		return true, fmt.Sprintf("client certificate unreadable: %v", err), nil
	}
	for _, c := range certs {
		if now.After(c.NotAfter) {
			return true, fmt.Sprintf("client certificate expired at %s", c.NotAfter.UTC().Format(time.RFC3339)), nil
		}
	}
	return false, "", nil
}

// BootstrapConfig is what Bootstrap needs.
type BootstrapConfig struct {
	Kubeconfig          string // written on success
	BootstrapKubeconfig string // the bootstrap token's credentials
	CertDir             string // <root-dir>/pki
	NodeName            string
	// Client overrides the client built from BootstrapKubeconfig (tests).
	Client CSRClient
}

// Bootstrap obtains the node's client certificate with the bootstrap
// credentials: a kube-apiserver-client-kubelet CSR for
// system:node:<name> in system:nodes, which it waits on until it is
// approved and signed (or denied, or ctx ends). It stores the pair in
// CertDir and writes a kubeconfig at cfg.Kubeconfig that uses it.
func Bootstrap(ctx context.Context, cfg BootstrapConfig) error {
	brc, err := loadKubeconfig(cfg.BootstrapKubeconfig)
	if err != nil {
		return fmt.Errorf("load bootstrap kubeconfig: %w", err)
	}
	var client kubernetes.Interface
	if cfg.Client != nil {
		client = newCSRClientset(cfg.Client)
	} else {
		var release func()
		if client, release, err = newReleasableCSRClientset(brc); err != nil {
			return fmt.Errorf("bootstrap client: %w", err)
		}
		// The bootstrap credentials are done with once the certificate is
		// issued: no connection authenticated by them stays open.
		defer release()
	}
	if err := os.MkdirAll(cfg.CertDir, 0o700); err != nil {
		return fmt.Errorf("create certificate directory: %w", err)
	}
	store, err := certificate.NewFileStore(clientPairPrefix, cfg.CertDir, cfg.CertDir, "", "")
	if err != nil {
		return fmt.Errorf("client certificate store: %w", err)
	}
	keyPath := filepath.Join(cfg.CertDir, pendingKeyFile)
	keyPEM, _, err := keyutil.LoadOrGenerateKeyFile(keyPath)
	if err != nil {
		return fmt.Errorf("bootstrap private key: %w", err)
	}
	certPEM, err := requestClientCertificate(ctx, client, keyPEM, cfg.NodeName)
	if err != nil {
		return err
	}
	if _, err := store.Update(certPEM, keyPEM); err != nil {
		return fmt.Errorf("store client certificate: %w", err)
	}
	if err := os.Remove(keyPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		klog.InfoS("Could not remove the bootstrap key file", "path", keyPath, "err", err)
	}
	if err := writeKubeconfig(cfg.Kubeconfig, brc, store.CurrentPath()); err != nil {
		return err
	}
	klog.InfoS("TLS bootstrap complete", "kubeconfig", cfg.Kubeconfig, "certificate", store.CurrentPath())
	return nil
}

// requestClientCertificate creates the CSR (retrying while the apiserver
// is unreachable) and waits for its certificate.
func requestClientCertificate(ctx context.Context, client kubernetes.Interface, keyPEM []byte, nodeName string) ([]byte, error) {
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("bootstrap private key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("bootstrap private key cannot sign")
	}
	subject := &pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{nodesGroup}}
	csrPEM, err := certutil.MakeCSR(key, subject, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("make certificate request: %w", err)
	}
	usages := certificate.DefaultKubeletClientGetUsages(key)
	name, err := csrName(signer.Public(), subject, usages)
	if err != nil {
		return nil, err
	}
	var reqName string
	var reqUID types.UID
	err = wait.PollUntilContextCancel(ctx, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		n, uid, err := csr.RequestCertificateWithContext(ctx, client, csrPEM, name,
			certificatesv1.KubeAPIServerClientKubeletSignerName, nil, usages, key)
		if err != nil {
			klog.InfoS("Certificate signing request failed; retrying", "csr", name, "err", err)
			return false, nil
		}
		reqName, reqUID = n, uid
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("create certificate signing request %s: %w", name, err)
	}
	klog.InfoS("Waiting for the client certificate", "csr", reqName)
	certPEM, err := csr.WaitForCertificate(ctx, client, reqName, reqUID)
	if err != nil {
		return nil, fmt.Errorf("certificate signing request %s: %w", reqName, err)
	}
	return certPEM, nil
}

// csrName derives the CSR's name from what it asks for, so the same key
// asking again (after a restart) names the same CSR.
func csrName(pub crypto.PublicKey, subject *pkix.Name, usages []certificatesv1.KeyUsage) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("marshal public key: %w", err)
	}
	h := sha256.New()
	// Length-prefixed fields: no two different requests hash alike.
	for _, part := range append([]string{string(der), subject.CommonName}, append(subject.Organization, usagesStrings(usages)...)...) {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	return "node-csr-" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)), nil
}

func usagesStrings(us []certificatesv1.KeyUsage) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = string(u)
	}
	return out
}

// writeKubeconfig writes the node's kubeconfig: the bootstrap
// kubeconfig's server and CA, and the client pair file (certificate and
// key in one PEM, as the store keeps them).
func writeKubeconfig(path string, brc *rest.Config, pairFile string) error {
	cluster := &clientcmdapi.Cluster{
		Server:                brc.Host,
		InsecureSkipTLSVerify: brc.Insecure,
		TLSServerName:         brc.ServerName,
		CertificateAuthority:  brc.CAFile,
	}
	if brc.CAFile == "" {
		cluster.CertificateAuthorityData = brc.CAData
	}
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"default-cluster": cluster},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"default-auth": {ClientCertificate: pairFile, ClientKey: pairFile}},
		Contexts:       map[string]*clientcmdapi.Context{"default-context": {Cluster: "default-cluster", AuthInfo: "default-auth"}},
		CurrentContext: "default-context",
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// loadKubeconfig reads a kubeconfig's current context into a rest.Config.
func loadKubeconfig(path string) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}
