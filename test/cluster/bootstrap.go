package cluster

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BootstrapGroup is the extra group CreateBootstrapToken's tokens
// authenticate as (besides system:bootstrappers), as kubeadm's default
// node token does.
const BootstrapGroup = "system:bootstrappers:kubeadm:default-node-token"

// BootstrapTokenTTL is how long a token from CreateBootstrapToken is valid
// (the tokencleaner controller deletes it afterwards).
const BootstrapTokenTTL = 24 * time.Hour

// CreateBootstrapToken creates a bootstrap token ("<id>.<secret>") for
// kubelet TLS bootstrapping: a bootstrap-token-<id> Secret in kube-system
// usable for authentication and signing, with extra group BootstrapGroup.
// It also ensures the RBAC kubeadm sets up for it (idempotently):
//   - kubeadm:kubelet-bootstrap: BootstrapGroup may create CSRs
//     (ClusterRole system:node-bootstrapper);
//   - kubeadm:node-autoapprove-bootstrap: their node client CSRs are
//     approved automatically (…:certificatesigningrequests:nodeclient);
//   - kubeadm:node-autoapprove-certificate-rotation: so are the renewal
//     CSRs of system:nodes (…:certificatesigningrequests:selfnodeclient).
func (c *Cluster) CreateBootstrapToken(ctx context.Context) (string, error) {
	if err := c.ensureBootstrapRBAC(ctx); err != nil {
		return "", err
	}
	id, err := randomToken(6)
	if err != nil {
		return "", err
	}
	secret, err := randomToken(16)
	if err != nil {
		return "", err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: metav1.NamespaceSystem},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"description":                    "skiff test cluster bootstrap token",
			"token-id":                       id,
			"token-secret":                   secret,
			"expiration":                     time.Now().Add(BootstrapTokenTTL).UTC().Format(time.RFC3339),
			"usage-bootstrap-authentication": "true",
			"usage-bootstrap-signing":        "true",
			"auth-extra-groups":              BootstrapGroup,
		},
	}
	if _, err := c.client.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("creating the bootstrap token secret: %w", err)
	}
	return id + "." + secret, nil
}

func (c *Cluster) ensureBootstrapRBAC(ctx context.Context) error {
	group := func(name string) []rbacv1.Subject {
		return []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}}
	}
	bindings := []*rbacv1.ClusterRoleBinding{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:kubelet-bootstrap"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-bootstrapper"},
			Subjects:   group(BootstrapGroup),
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:node-autoapprove-bootstrap"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:certificates.k8s.io:certificatesigningrequests:nodeclient"},
			Subjects:   group(BootstrapGroup),
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:node-autoapprove-certificate-rotation"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"},
			Subjects:   group("system:nodes"),
		},
	}
	for _, b := range bindings {
		if _, err := c.client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ClusterRoleBinding %s: %w", b.Name, err)
		}
	}
	return nil
}

// BootstrapKubeconfig writes a kubeconfig at path that authenticates with
// a bootstrap token, as a kubelet's --bootstrap-kubeconfig.
func (c *Cluster) BootstrapKubeconfig(token, path string) error {
	caPEM, err := os.ReadFile(c.CAFile())
	if err != nil {
		return err
	}
	return writeKubeconfig(path, c.apiURL, caPEM, kubeconfigUser{name: "kubelet-bootstrap", token: token})
}

// randomToken returns n random characters of [a-z0-9], the alphabet of
// bootstrap token ids and secrets.
func randomToken(n int) (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	out := make([]byte, 0, n)
	buf := make([]byte, 2*n)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", err
		}
		for _, b := range buf {
			// 252 = 7*36: rejecting the rest keeps the draw uniform.
			if b < 252 && len(out) < n {
				out = append(out, alphabet[int(b)%len(alphabet)])
			}
		}
	}
	return string(out), nil
}
