package payload

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/skiff-sh/skiff/internal/volume/atomic"
)

// TrustBundleGetter reads ClusterTrustBundles: their spec.trustBundle,
// PEM certificates.
type TrustBundleGetter interface {
	// TrustBundle returns the named bundle's certificates; a missing bundle
	// is an API NotFound error.
	TrustBundle(name string) (string, error)
	// SignerTrustBundles returns the certificates of every bundle of the
	// signer whose labels match sel.
	SignerTrustBundles(signer string, sel labels.Selector) ([]string, error)
}

// projectTrustBundle writes a clusterTrustBundle source: the certificates
// of the named bundle, or of all the signer's bundles the selector picks,
// deduplicated. A missing bundle (or no match) is an error unless the
// source is optional, when the file is written empty, as upstream.
func projectTrustBundle(p *v1.ClusterTrustBundleProjection, get TrustBundleGetter, mode int32) (map[string]atomic.File, error) {
	if get == nil {
		return nil, errors.New("cannot read ClusterTrustBundles: no trust bundle getter")
	}
	optional := isTrue(p.Optional)
	var bundles []string
	switch {
	case p.Name != nil:
		b, err := get.TrustBundle(*p.Name)
		if apierrors.IsNotFound(err) && optional {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("get ClusterTrustBundle %q: %w", *p.Name, err)
		}
		bundles = []string{b}
	case p.SignerName != nil:
		// As upstream: a nil selector matches nothing, an empty one all.
		sel, err := metav1.LabelSelectorAsSelector(p.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("clusterTrustBundle label selector: %w", err)
		}
		if bundles, err = get.SignerTrustBundles(*p.SignerName, sel); err != nil {
			return nil, fmt.Errorf("list ClusterTrustBundles of signer %q: %w", *p.SignerName, err)
		}
		if len(bundles) == 0 && !optional {
			return nil, fmt.Errorf("signer %q and label selector %v matched no ClusterTrustBundle", *p.SignerName, sel)
		}
	default:
		return nil, errors.New("clusterTrustBundle source names neither a bundle nor a signer")
	}
	return map[string]atomic.File{p.Path: {Data: normalizeTrustAnchors(bundles), Mode: mode}}, nil
}

// normalizeTrustAnchors re-encodes every PEM block of the bundles as a
// CERTIFICATE, each certificate once, in a stable (sorted) order so that a
// file is only rewritten when the set changes.
func normalizeTrustAnchors(bundles []string) []byte {
	var ders [][]byte
	for _, b := range bundles {
		rest := []byte(b)
		for {
			var block *pem.Block
			if block, rest = pem.Decode(rest); block == nil {
				break
			}
			ders = append(ders, block.Bytes)
		}
	}
	slices.SortFunc(ders, bytes.Compare)
	ders = slices.CompactFunc(ders, bytes.Equal)
	out := []byte{}
	for _, der := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return out
}
