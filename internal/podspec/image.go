package podspec

import (
	// Digests in image references need their hash functions registered.
	_ "crypto/sha256"
	_ "crypto/sha512"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
)

// defaultPullPolicy is Always for a ":latest" image (explicit, or implied by
// having neither tag nor digest) and IfNotPresent otherwise. An unparsable
// reference gets IfNotPresent, as upstream: the kubelet reports it as
// InvalidImageName before any pull.
func defaultPullPolicy(image string) v1.PullPolicy {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return v1.PullIfNotPresent
	}
	tagged, hasTag := named.(reference.Tagged)
	_, hasDigest := named.(reference.Digested)
	if (hasTag && tagged.Tag() == "latest") || (!hasTag && !hasDigest) {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}
