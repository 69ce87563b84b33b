package cri

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// IsNotFound reports a CRI NotFound. On stop and remove it means the
// object is already gone: CRI calls are idempotent, so that is success.
func IsNotFound(err error) bool {
	return err != nil && status.Code(err) == codes.NotFound
}
