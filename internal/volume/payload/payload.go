// Package payload computes the files of configMap, secret, downwardAPI and
// projected volumes from API objects, as upstream kubelet's volume plugins
// do, ready for atomic.Write. It fetches nothing itself: callers pass the
// objects, or getters for the projected case, and do the TokenRequest
// through a TokenFunc (TokenManager provides one).
//
// Ownership: upstream gives every file of these volumes the pod's fsGroup
// after writing them. The functions here leave File.FsGroup unset; callers
// apply it to any payload with SetFSGroup(files, FSGroup(pod)). Projected
// does consult the pod's fsGroup and user itself, for the one thing that
// depends on them: token files become 0600 (0640 once the group is applied)
// and owned by the pods' user, as upstream does.
package payload

import (
	"errors"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/skiff-sh/skiff/internal/volume/atomic"
)

// DefaultMode is the API default of defaultMode for all four volume types.
const DefaultMode int32 = 0o644

// modeOr returns *m, or def when m is unset.
func modeOr(m *int32, def int32) int32 {
	if m != nil {
		return *m
	}
	return def
}

func isTrue(b *bool) bool { return b != nil && *b }

// missing reports whether a getter's answer means the object does not
// exist: no object and no error, or an API NotFound error.
func missing(obj any, err error) bool {
	if err != nil {
		return apierrors.IsNotFound(err)
	}
	switch o := obj.(type) {
	case *v1.ConfigMap:
		return o == nil
	case *v1.Secret:
		return o == nil
	}
	return obj == nil
}

// aggregate joins errors the way upstream's volume plugins report them
// (utilerrors.NewAggregate: one error as is, several as "[a, b]"), keeping
// errors.Is/As working on the parts.
func aggregate(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return utilerrors.NewAggregate(errs)
}

// SetFSGroup gives every file the group gid (nil leaves them as they are)
// and returns files. Upstream applies the pod's fsGroup to the files of all
// four volume types.
func SetFSGroup(files map[string]atomic.File, gid *int64) map[string]atomic.File {
	if gid == nil {
		return files
	}
	for p, f := range files {
		g := *gid
		f.FsGroup = &g
		files[p] = f
	}
	return files
}

var errNoPod = errors.New("no pod given")
