package podspec

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// imageRef is a parsed container image reference, following the grammar of
// github.com/distribution/reference (not in the module graph, so kept small
// here): [domain/]path[:tag][@digest].
type imageRef struct {
	Domain string // registry host[:port], empty when the reference has none
	Path   string // repository path, e.g. "library/nginx" or "nginx"
	Tag    string
	Digest string
}

var (
	// A path component: lowercase alphanumerics joined by '.', '_', '__' or dashes.
	pathComponentRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	// A registry host: DNS-like labels or a bracketed IPv6 address, optional port.
	domainRE = regexp.MustCompile(`^(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?$`)
	tagRE    = regexp.MustCompile(`^[\w][\w.-]{0,127}$`)
	digestRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$`)
	// A bare 64-hex string is an image ID, not a name.
	imageIDRE = regexp.MustCompile(`^[a-f0-9]{64}$`)
)

const maxImageNameLength = 255

// parseImageRef splits and checks an image reference. It does not apply
// Docker Hub normalization: callers here only need the tag and digest.
func parseImageRef(s string) (imageRef, error) {
	var ref imageRef
	if s == "" {
		return ref, errors.New("empty image reference")
	}
	name := s
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name, ref.Digest = name[:i], name[i+1:]
		if !digestRE.MatchString(ref.Digest) {
			return imageRef{}, fmt.Errorf("invalid digest %q", ref.Digest)
		}
	}
	// A ':' after the last '/' starts the tag; earlier ones belong to a port.
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name, ref.Tag = name[:i], name[i+1:]
		if !tagRE.MatchString(ref.Tag) {
			return imageRef{}, fmt.Errorf("invalid tag %q", ref.Tag)
		}
	}
	if name == "" {
		return imageRef{}, errors.New("empty repository name")
	}
	if len(name) > maxImageNameLength {
		return imageRef{}, fmt.Errorf("repository name longer than %d characters", maxImageNameLength)
	}
	if imageIDRE.MatchString(name) {
		return imageRef{}, fmt.Errorf("repository name %q is a 64-byte hexadecimal image ID", name)
	}
	ref.Path = name
	// As upstream, the first component is a registry when it looks like a
	// host (has '.' or ':', is localhost, or has upper case letters).
	if first, rest, ok := strings.Cut(name, "/"); ok &&
		(strings.ContainsAny(first, ".:") || first == "localhost" || strings.ToLower(first) != first) {
		if !domainRE.MatchString(first) {
			return imageRef{}, fmt.Errorf("invalid registry %q", first)
		}
		ref.Domain, ref.Path = first, rest
	}
	for _, c := range strings.Split(ref.Path, "/") {
		if !pathComponentRE.MatchString(c) {
			if strings.ToLower(c) != c {
				return imageRef{}, fmt.Errorf("repository name %q must be lowercase", ref.Path)
			}
			return imageRef{}, fmt.Errorf("invalid repository path component %q", c)
		}
	}
	return ref, nil
}

// defaultPullPolicy is Always for a ":latest" image (explicit, or implied by
// having neither tag nor digest) and IfNotPresent otherwise. An unparsable
// reference gets IfNotPresent, as upstream: pulling it would fail anyway.
func defaultPullPolicy(image string) v1.PullPolicy {
	ref, err := parseImageRef(image)
	if err != nil {
		return v1.PullIfNotPresent
	}
	if ref.Tag == "latest" || (ref.Tag == "" && ref.Digest == "") {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}
