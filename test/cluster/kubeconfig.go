package cluster

import (
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// AdminKubeconfig is the path of a kubeconfig for kubernetes-admin
// (group system:masters).
func (c *Cluster) AdminKubeconfig() string { return c.path("admin.kubeconfig") }

// NodeKubeconfig writes a kubeconfig at path for the identity of node
// nodeName: a new client certificate with CN system:node:<nodeName> and O
// system:nodes, signed by the cluster CA, embedded in the file.
func (c *Cluster) NodeKubeconfig(nodeName, path string) error {
	ca, err := loadKeyPair(c.path("pki", "ca"))
	if err != nil {
		return err
	}
	user := "system:node:" + nodeName
	kp, err := ca.sign(leafSpec{cn: user, orgs: []string{"system:nodes"}, client: true})
	if err != nil {
		return err
	}
	return writeCertKubeconfig(path, c.apiURL, ca, user, kp)
}

// KubeconfigForToken writes a kubeconfig at path that authenticates with
// a bearer token (e.g. a ServiceAccount token).
func (c *Cluster) KubeconfigForToken(user, token, path string) error {
	caPEM, err := os.ReadFile(c.CAFile())
	if err != nil {
		return err
	}
	return writeKubeconfig(path, c.apiURL, caPEM, kubeconfigUser{name: user, token: token})
}

// initClient builds the admin rest.Config and clientset.
func (c *Cluster) initClient() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.AdminKubeconfig())
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c.restConfig, c.client = cfg, cs
	return nil
}

// writeCertKubeconfig writes a kubeconfig at path for user, who
// authenticates with kp, a client certificate that ca signed.
func writeCertKubeconfig(path, server string, ca *keyPair, user string, kp *keyPair) error {
	keyPEM, err := kp.keyPEM()
	if err != nil {
		return err
	}
	return writeKubeconfig(path, server, ca.certPEM(), kubeconfigUser{name: user, certPEM: kp.certPEM(), keyPEM: keyPEM})
}

// kubeconfigUser is how a kubeconfig authenticates: a client certificate
// or a bearer token.
type kubeconfigUser struct {
	name    string
	certPEM []byte
	keyPEM  []byte
	token   string
}

// writeKubeconfig writes a self-contained kubeconfig (CA, client
// certificate and key embedded) for server.
func writeKubeconfig(path, server string, caPEM []byte, u kubeconfigUser) error {
	const clusterName = "skiff"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[clusterName] = &clientcmdapi.Cluster{
		Server:                   server,
		CertificateAuthorityData: caPEM,
	}
	cfg.AuthInfos[u.name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: u.certPEM,
		ClientKeyData:         u.keyPEM,
		Token:                 u.token,
	}
	ctxName := u.name + "@" + clusterName
	cfg.Contexts[ctxName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: u.name}
	cfg.CurrentContext = ctxName
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, data, 0o600)
}
