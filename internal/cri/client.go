// Package cri connects to a Container Runtime Interface endpoint through
// k8s.io/cri-client and holds the label and annotation conventions Skiff
// uses to find its pods and containers again.
package cri

import (
	"context"
	"fmt"
	"strings"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/metrics"
)

// Client bundles the runtime and image services of one endpoint.
type Client struct {
	Runtime internalapi.RuntimeService
	Images  internalapi.ImageManagerService
	// RuntimeName and RuntimeVersion come from the Version call, e.g.
	// "containerd" and "1.6.20"; the name prefixes container IDs in status.
	RuntimeName    string
	RuntimeVersion string
}

// Dial connects to the runtime and image endpoints (image defaults to the
// runtime endpoint) and checks that the runtime answers Version. Every
// call is counted and timed in m; nil counts nothing.
func Dial(ctx context.Context, runtimeEndpoint, imageEndpoint string, timeout time.Duration, m *metrics.Registry) (*Client, error) {
	if imageEndpoint == "" {
		imageEndpoint = runtimeEndpoint
	}
	logger := klog.FromContext(ctx)
	rs, err := remote.NewRemoteRuntimeService(runtimeEndpoint, timeout, nil, &logger)
	if err != nil {
		return nil, fmt.Errorf("connect to container runtime %s: %w", runtimeEndpoint, err)
	}
	is, err := remote.NewRemoteImageService(imageEndpoint, timeout, nil, &logger)
	if err != nil {
		return nil, fmt.Errorf("connect to image service %s: %w", imageEndpoint, err)
	}
	c := &Client{Runtime: rs, Images: is}
	if m != nil {
		c.Runtime, c.Images = instrumentedRuntime{rs, &m.Runtime}, instrumentedImages{is, &m.Runtime}
	}
	vctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := rs.Version(vctx, "v1")
	if err != nil {
		return nil, fmt.Errorf("container runtime at %s is not answering (is it running?): %w", runtimeEndpoint, err)
	}
	c.RuntimeName, c.RuntimeVersion = v.RuntimeName, v.RuntimeVersion
	return c, nil
}

// ContainerID formats a runtime container ID as the Pod API shows it.
func (c *Client) ContainerID(id string) string {
	return c.RuntimeName + "://" + id
}

// RuntimeID is ContainerID's inverse: "containerd://abc" is "abc" to the
// runtime. An ID without a scheme is returned as it is.
func RuntimeID(apiID string) string {
	if _, id, ok := strings.Cut(apiID, "://"); ok {
		return id
	}
	return apiID
}
