package cri

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestIsNotFound(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("not found"), false},
		{status.Error(codes.Unknown, "not found"), false},
		{status.Error(codes.NotFound, "no such sandbox"), true},
		{fmt.Errorf("stop: %w", status.Error(codes.NotFound, "no such container")), true},
	} {
		if got := IsNotFound(tc.err); got != tc.want {
			t.Errorf("IsNotFound(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
