package volume

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// trustBundles reads ClusterTrustBundles (certificates.k8s.io/v1beta1, the
// version Kubernetes 1.34 serves when the ClusterTrustBundle feature is on)
// on every sync of a pod, as ConfigMaps are read.
type trustBundles struct {
	ctx    context.Context
	client Client
}

func (t trustBundles) TrustBundle(name string) (string, error) {
	b, err := t.client.CertificatesV1beta1().ClusterTrustBundles().Get(t.ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return b.Spec.TrustBundle, nil
}

func (t trustBundles) SignerTrustBundles(signer string, sel labels.Selector) ([]string, error) {
	if _, selectable := sel.Requirements(); !selectable {
		return nil, nil // labels.Nothing()
	}
	list, err := t.client.CertificatesV1beta1().ClusterTrustBundles().List(t.ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if apierrors.IsNotFound(err) {
		return nil, errTrustBundleAPI
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, b := range list.Items {
		if b.Spec.SignerName == signer {
			out = append(out, b.Spec.TrustBundle)
		}
	}
	return out, nil
}

var errTrustBundleAPI = apierrors.NewServiceUnavailable("the apiserver does not serve certificates.k8s.io/v1beta1 clustertrustbundles (feature gate ClusterTrustBundle and --runtime-config)")
