// Package images pulls container images through CRI the way the kubelet
// configuration asks: one at a time (serializeImagePulls, the default) or
// up to maxParallelImagePulls at once, with the credentials a pod's pull
// secrets hold for the image's registry.
package images

import (
	"context"
	// Digests in image references need their hash functions registered.
	_ "crypto/sha256"
	_ "crypto/sha512"
	"fmt"
	"time"

	"github.com/distribution/reference"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/images/keyring"
)

// Puller runs CRI image pulls within the configured parallelism.
type Puller struct {
	svc internalapi.ImageManagerService
	// slots holds one token per pull allowed at once; nil: no limit.
	slots chan struct{}
}

// NewPuller limits pulls to one at a time when serialize is set, else to
// maxParallel when that is positive, else not at all.
func NewPuller(svc internalapi.ImageManagerService, serialize bool, maxParallel int32) *Puller {
	p := &Puller{svc: svc}
	switch {
	case serialize:
		p.slots = make(chan struct{}, 1)
	case maxParallel > 0:
		p.slots = make(chan struct{}, maxParallel)
	}
	return p
}

// Result is a successful pull.
type Result struct {
	ImageRef string        // what the runtime returned: its image ID
	Size     uint64        // bytes, as the runtime reports the image
	Pulling  time.Duration // the pull itself, without waiting for a slot
}

// Pull pulls image with each credential in turn until one works, or
// anonymously when there are none (as upstream, credentials that matched
// but failed do not fall back to an anonymous pull). The error lists every
// attempt's, as upstream's.
func (p *Puller) Pull(ctx context.Context, image string, creds []keyring.Credential, sandbox *runtimeapi.PodSandboxConfig) (Result, error) {
	if p.slots != nil {
		select {
		case p.slots <- struct{}{}:
			defer func() { <-p.slots }()
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
	start := time.Now()
	spec := &runtimeapi.ImageSpec{Image: image}
	auths := []*runtimeapi.AuthConfig{nil}
	if len(creds) > 0 {
		auths = auths[:0]
		for _, c := range creds {
			auths = append(auths, &runtimeapi.AuthConfig{Username: c.Username, Password: c.Password})
		}
	}
	var errs []error
	for i, auth := range auths {
		ref, err := p.svc.PullImage(ctx, spec, auth, sandbox)
		if err != nil {
			if auth != nil {
				klog.V(3).InfoS("Pull with credentials failed", "image", image, "secret", creds[i].Source, "err", err)
			}
			errs = append(errs, err)
			continue
		}
		res := Result{ImageRef: ref, Pulling: time.Since(start)}
		if st, err := p.svc.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false); err == nil && st.Image != nil {
			res.Size = st.Image.Size
		}
		return res, nil
	}
	if len(errs) == 1 {
		return Result{}, errs[0]
	}
	return Result{}, utilerrors.NewAggregate(errs)
}

// Normalize parses an image reference as the kubelet does: it must be a
// valid (possibly Docker Hub short) name; a name without tag or digest gets
// ":latest" appended. It returns the image to pull, as written plus the
// default tag, and the fully qualified repository the keyring matches
// against (e.g. "docker.io/library/busybox").
func Normalize(image string) (pull, repo string, err error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", "", fmt.Errorf("couldn't parse image name %q: %w", image, err)
	}
	_, tagged := named.(reference.Tagged)
	_, digested := named.(reference.Digested)
	pull = image
	if !tagged && !digested {
		pull += ":latest"
	}
	return pull, named.Name(), nil
}
